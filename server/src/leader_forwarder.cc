#include "leader_forwarder.h"

#include "epoch/server/etcd_errors.h"

namespace epoch::server {
namespace {

// State of one forwarded call; deletes itself when the call completes.
template <typename Request, typename Response>
struct ForwardCall {
  grpc::ClientContext context;
  Request request;
  Response response;
};

Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return Status::Ok();
  const EtcdError* known = FindEtcdError(s.error_message());
  if (known) return known->ToStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    // The leader could not be reached; whether it received the write is unknown.
    return etcd_errors::kTimeoutDueToConnectionLost.ToStatus();
  }
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Status::Timeout("context deadline exceeded");
  }
  return Status::Unavailable(s.error_message());
}

// `invoke(context, request, response, on_done)` starts the asynchronous call on the stub.
template <typename Request, typename Response, typename Invoke, typename SetResponse>
void Start(const Request& request, std::chrono::system_clock::time_point deadline, Invoke invoke,
           SetResponse set, LeaderForwarder::Callback done) {
  auto* call = new ForwardCall<Request, Response>();
  call->request = request;
  call->context.set_deadline(deadline);
  call->context.AddMetadata(kForwardedMetadata, "1");
  invoke(&call->context, &call->request, &call->response,
         [call, set, done = std::move(done)](grpc::Status s) {
           v1::InternalResponse out;
           if (s.ok()) set(&out, std::move(call->response));
           delete call;
           done(FromGrpc(s), out);
         });
}

}  // namespace

etcdserverpb::KV::Stub* LeaderForwarder::StubFor(NodeId leader,
                                                 const std::shared_ptr<grpc::Channel>& channel) {
  std::lock_guard lock(mu_);
  auto it = stubs_.find(leader);
  if (it != stubs_.end()) return it->second.get();
  auto stub = etcdserverpb::KV::NewStub(channel);
  auto* raw = stub.get();
  stubs_.emplace(leader, std::move(stub));
  return raw;
}

void LeaderForwarder::Forward(NodeId leader, const v1::InternalRequest& request,
                              std::chrono::system_clock::time_point deadline, Callback done) {
  std::shared_ptr<grpc::Channel> channel = leases_.ChannelFor(leader);
  if (!channel) return done(etcd_errors::kNotLeader.ToStatus(), {});
  // Not connected: do not send (gRPC would fail it fast, or queue it, and either way the caller
  // could not tell whether the leader got it). Asking for the state starts a connection attempt.
  if (channel->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    return done(Status::Unavailable(kLeaderUnreachable), {});
  }
  etcdserverpb::KV::Stub* stub = StubFor(leader, channel);
  switch (request.request_case()) {
    case v1::InternalRequest::kPut:
      return Start<etcdserverpb::PutRequest, etcdserverpb::PutResponse>(
          request.put(), deadline,
          [stub](grpc::ClientContext* c, const etcdserverpb::PutRequest* q,
                 etcdserverpb::PutResponse* r, std::function<void(grpc::Status)> f) {
            stub->async()->Put(c, q, r, std::move(f));
          },
          [](v1::InternalResponse* out, etcdserverpb::PutResponse r) {
            *out->mutable_put() = std::move(r);
          },
          std::move(done));
    case v1::InternalRequest::kDeleteRange:
      return Start<etcdserverpb::DeleteRangeRequest, etcdserverpb::DeleteRangeResponse>(
          request.delete_range(), deadline,
          [stub](grpc::ClientContext* c, const etcdserverpb::DeleteRangeRequest* q,
                 etcdserverpb::DeleteRangeResponse* r, std::function<void(grpc::Status)> f) {
            stub->async()->DeleteRange(c, q, r, std::move(f));
          },
          [](v1::InternalResponse* out, etcdserverpb::DeleteRangeResponse r) {
            *out->mutable_delete_range() = std::move(r);
          },
          std::move(done));
    case v1::InternalRequest::kTxn:
      return Start<etcdserverpb::TxnRequest, etcdserverpb::TxnResponse>(
          request.txn(), deadline,
          [stub](grpc::ClientContext* c, const etcdserverpb::TxnRequest* q,
                 etcdserverpb::TxnResponse* r, std::function<void(grpc::Status)> f) {
            stub->async()->Txn(c, q, r, std::move(f));
          },
          [](v1::InternalResponse* out, etcdserverpb::TxnResponse r) {
            *out->mutable_txn() = std::move(r);
          },
          std::move(done));
    case v1::InternalRequest::kCompaction:
      return Start<etcdserverpb::CompactionRequest, etcdserverpb::CompactionResponse>(
          request.compaction(), deadline,
          [stub](grpc::ClientContext* c, const etcdserverpb::CompactionRequest* q,
                 etcdserverpb::CompactionResponse* r, std::function<void(grpc::Status)> f) {
            stub->async()->Compact(c, q, r, std::move(f));
          },
          [](v1::InternalResponse* out, etcdserverpb::CompactionResponse r) {
            *out->mutable_compaction() = std::move(r);
          },
          std::move(done));
    case v1::InternalRequest::kLeaseGrant:
    case v1::InternalRequest::kLeaseRevoke:
      return leases_.ForwardWrite(leader, request, deadline, std::move(done));
    default: return done(etcd_errors::kNotLeader.ToStatus(), {});
  }
}

}  // namespace epoch::server
