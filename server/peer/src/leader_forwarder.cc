#include "epoch/peer/leader_forwarder.h"

#include "epoch/etcd_errors.h"

namespace epoch::server {

void LeaderForwarder::Forward(NodeId leader, const v1::InternalRequest& request,
                              std::chrono::system_clock::time_point deadline, Callback done) {
  std::shared_ptr<grpc::Channel> channel = leases_.ChannelFor(leader);
  if (!channel) return done(etcd_errors::kNotLeader.ToStatus(), {});
  // Not connected: do not send (gRPC would fail it fast, or queue it, and either way the caller
  // could not tell whether the leader got it). Asking for the state starts a connection attempt.
  if (channel->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    return done(etcd_errors::kLeaderUnreachable.ToStatus(), {});
  }
  switch (request.request_case()) {
    case v1::InternalRequest::kLeaseGrant:
    case v1::InternalRequest::kLeaseRevoke:
      return leases_.ForwardWrite(leader, request, deadline, std::move(done));
    default: return done(etcd_errors::kNotLeader.ToStatus(), {});
  }
}

}  // namespace epoch::server
