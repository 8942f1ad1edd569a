#include "epoch/peer/lease_forwarder.h"

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {
namespace {

// One unary call in flight; deletes itself when it completes (on a completion-queue thread).
template <typename Response>
class ClientCall final : public rpc::detail::Tag {
 public:
  using Callback = std::function<void(const Status&, const Response&)>;
  ClientCall(std::shared_ptr<void> stub, Callback done)
      : stub_(std::move(stub)), done_(std::move(done)) {}

  grpc::ClientContext context;
  Response response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader;

  void Done(bool /*ok*/) override {
    Callback done = std::move(done_);
    Response response_copy = std::move(response);
    const Status s = FromForwardedStatus(status);
    delete this;
    done(s, response_copy);
  }

 private:
  std::shared_ptr<void> stub_;  // the stub outlives its call
  Callback done_;
};

// `prepare(context, cq)` is the stub's PrepareAsyncX bound to its request.
template <typename Response, typename Prepare>
void StartCall(rpc::ClientQueue& queue, std::shared_ptr<void> stub,
               std::chrono::system_clock::time_point deadline, Prepare prepare,
               std::function<void(const Status&, const Response&)> done) {
  auto* call = new ClientCall<Response>(std::move(stub), std::move(done));
  call->context.set_deadline(deadline);
  call->context.AddMetadata(kForwardedMetadata, "1");
  const bool started = queue.Run([&](grpc::CompletionQueue* cq) {
    call->reader = prepare(&call->context, cq);
    call->reader->StartCall();
    call->reader->Finish(&call->response, &call->status, call->Started());
  });
  if (started) return;
  call->status =
      grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(etcd_errors::kStopped.message));
  call->Done(false);
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
  constexpr std::string_view kHttps = "https://";
  constexpr std::string_view kHttp = "http://";
  const bool tls = address.starts_with(kHttps);
  if (tls && !tls_) return nullptr;
  std::string target = address;
  if (tls) target.erase(0, kHttps.size());
  if (target.starts_with(kHttp)) target.erase(0, kHttp.size());
  if (!target.empty() && target.back() == '/') target.pop_back();
  std::lock_guard lock(mu_);
  auto it = channels_.find(leader);
  // A member that published another address (restarted elsewhere) gets a new channel.
  if (it != channels_.end() && it->second.address == address) return it->second.channel;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel =
      grpc::CreateCustomChannel(target, tls ? tls_ : grpc::InsecureChannelCredentials(), args);
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
  StartCall<v1::LeaseKeepAliveResponse>(
      queue_, stub, deadline,
      [stub, request](grpc::ClientContext* c, grpc::CompletionQueue* cq) {
        return stub->PrepareAsyncRenew(c, request, cq);
      },
      std::move(done));
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
    return StartCall<v1::LeaseGrantResponse>(
        queue_, stub, deadline,
        [stub, grant](grpc::ClientContext* c, grpc::CompletionQueue* cq) {
          return stub->PrepareAsyncGrant(c, grant, cq);
        },
        [done = std::move(done)](const Status& s, const v1::LeaseGrantResponse& r) {
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
    return StartCall<etcdserverpb::LeaseRevokeResponse>(
        queue_, stub, deadline,
        [stub, revoke = request.lease_revoke()](grpc::ClientContext* c, grpc::CompletionQueue* cq) {
          return stub->PrepareAsyncLeaseRevoke(c, revoke, cq);
        },
        [done = std::move(done)](const Status& s, const etcdserverpb::LeaseRevokeResponse& r) {
          v1::InternalResponse out;
          if (s.ok()) *out.mutable_lease_revoke() = r;
          done(s, out);
        });
  }
  done(etcd_errors::kNotLeader.ToStatus(), {});
}

}  // namespace epoch::server
