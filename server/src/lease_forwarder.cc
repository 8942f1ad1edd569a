#include "lease_forwarder.h"

#include "epoch/server/etcd_errors.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "leader_forwarder.h"

namespace epoch::server {
namespace {

// One unary call in flight; deletes itself when it completes.
template <typename Request, typename Response>
struct Call {
  grpc::ClientContext context;
  Request request;
  Response response;
};

template <typename Request, typename Response, typename Invoke, typename Done>
void StartCall(Request request, std::chrono::system_clock::time_point deadline, Invoke invoke,
               Done done) {
  auto* call = new Call<Request, Response>();
  call->request = std::move(request);
  call->context.set_deadline(deadline);
  call->context.AddMetadata(kForwardedMetadata, "1");
  invoke(&call->context, &call->request, &call->response,
         [call, done = std::move(done)](grpc::Status s) mutable {
           Response response = std::move(call->response);
           delete call;
           done(FromForwardedStatus(s), response);
         });
}

}  // namespace

Status FromForwardedStatus(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  if (const EtcdError* known = FindEtcdError(s.error_message())) return known->ToStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return etcd_errors::kTimeoutDueToConnectionLost.ToStatus();
  }
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Status::Timeout("context deadline exceeded");
  }
  return Status::Unavailable(s.error_message());
}

std::shared_ptr<grpc::Channel> LeaseForwarder::ChannelFor(NodeId leader) {
  const std::string address = address_of_(leader);
  if (address.empty()) return nullptr;
  std::lock_guard lock(mu_);
  auto it = channels_.find(leader);
  // A member that published another address (restarted elsewhere) gets a new channel.
  if (it != channels_.end() && it->second.address == address) return it->second.channel;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  channels_[leader] = Cached{address, channel};
  return channel;
}

void LeaseForwarder::Renew(NodeId leader, LeaseId id,
                           std::chrono::system_clock::time_point deadline, RenewCallback done) {
  auto channel = ChannelFor(leader);
  if (!channel) return done(etcd_errors::kNotLeader.ToStatus(), {});
  auto stub = std::shared_ptr<v1::Lease::Stub>(v1::Lease::NewStub(channel));
  v1::LeaseKeepAliveRequest request;
  request.set_id(id.value());
  StartCall<v1::LeaseKeepAliveRequest, v1::LeaseKeepAliveResponse>(
      std::move(request), deadline,
      [stub](grpc::ClientContext* c, const v1::LeaseKeepAliveRequest* q,
             v1::LeaseKeepAliveResponse* r,
             std::function<void(grpc::Status)> f) { stub->async()->Renew(c, q, r, std::move(f)); },
      [stub, done = std::move(done)](const Status& s, const v1::LeaseKeepAliveResponse& r) {
        done(s, r);
      });
}

void LeaseForwarder::ForwardWrite(NodeId leader, const v1::InternalRequest& request,
                                  std::chrono::system_clock::time_point deadline,
                                  WriteCallback done) {
  auto channel = ChannelFor(leader);
  if (!channel) return done(etcd_errors::kNotLeader.ToStatus(), {});
  if (request.has_lease_grant()) {
    auto stub = std::shared_ptr<v1::Lease::Stub>(v1::Lease::NewStub(channel));
    v1::LeaseGrantRequest grant;
    grant.set_id(request.lease_grant().id());
    grant.set_ttl_ms(request.lease_grant().ttl_ms());
    return StartCall<v1::LeaseGrantRequest, v1::LeaseGrantResponse>(
        std::move(grant), deadline,
        [stub](grpc::ClientContext* c, const v1::LeaseGrantRequest* q, v1::LeaseGrantResponse* r,
               std::function<void(grpc::Status)> f) {
          stub->async()->Grant(c, q, r, std::move(f));
        },
        [stub, done = std::move(done)](const Status& s, const v1::LeaseGrantResponse& r) {
          v1::InternalResponse out;
          if (s.ok()) {
            v1::LeaseGrantResult* g = out.mutable_lease_grant();
            *g->mutable_header() = r.header();
            g->set_id(r.id());
            g->set_ttl_ms(r.ttl_ms());
            g->set_deadline_cluster_ms(r.deadline_cluster_ms());
          }
          done(s, out);
        });
  }
  if (request.has_lease_revoke()) {
    auto stub = std::shared_ptr<etcdserverpb::Lease::Stub>(etcdserverpb::Lease::NewStub(channel));
    return StartCall<etcdserverpb::LeaseRevokeRequest, etcdserverpb::LeaseRevokeResponse>(
        request.lease_revoke(), deadline,
        [stub](grpc::ClientContext* c, const etcdserverpb::LeaseRevokeRequest* q,
               etcdserverpb::LeaseRevokeResponse* r, std::function<void(grpc::Status)> f) {
          stub->async()->LeaseRevoke(c, q, r, std::move(f));
        },
        [stub, done = std::move(done)](const Status& s,
                                       const etcdserverpb::LeaseRevokeResponse& r) {
          v1::InternalResponse out;
          if (s.ok()) *out.mutable_lease_revoke() = r;
          done(s, out);
        });
  }
  done(etcd_errors::kNotLeader.ToStatus(), {});
}

}  // namespace epoch::server
