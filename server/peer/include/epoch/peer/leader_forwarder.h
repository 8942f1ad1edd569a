// LeaderForwarder: sends a lease grant or revoke that reached a follower on to the leader's client
// endpoint, as the etcd v3 call it came from, and hands back the leader's answer. (KV writes go
// and lease revokes go over the peer link instead when there is one: PeerForwarder. A revoke sent
// here carries no caller, so with auth on the leader refuses it.)
//
// The forwarded call carries the metadata "epoch-forwarded: 1"; a node that receives a forwarded
// write and is not the leader answers "not leader" instead of forwarding again, so a message
// never loops between two nodes that disagree about the leader.
//
// A write is sent only on a connected channel. When the leader cannot be reached (it just died,
// or is restarting) the write fails at once with ErrorId::kLeaderUnreachable, which says it was NOT
// sent: the caller may wait for a leader and try again without risking a double apply. Once sent, a
// lost connection is an unknown outcome ("request timed out, possibly due to connection lost").
//
// Threading: thread-safe; channels are created lazily and shared.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "epoch/etcd_errors.h"
#include "epoch/peer/lease_forwarder.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

inline constexpr char kForwardedMetadata[] = "epoch-forwarded";

class LeaderForwarder {
 public:
  using Callback = std::function<void(const Status&, const v1::InternalResponse&)>;

  LeaderForwarder(rpc::ClientQueue& queue, LeaseForwarder::AddressOf address_of,
                  std::shared_ptr<grpc::ChannelCredentials> tls = nullptr)
      : leases_(queue, std::move(address_of), std::move(tls)) {}

  // `done` runs on a gRPC server thread (rpc::ClientQueue). Lease grants and revokes go through
  // LeaseForwarder; requests of any other kind fail with etcd_errors::kNotLeader.
  void Forward(NodeId leader, const v1::InternalRequest& request,
               std::chrono::system_clock::time_point deadline, Callback done);

 private:
  LeaseForwarder leases_;
};

}  // namespace epoch::server
