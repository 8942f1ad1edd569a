// LeaderForwarder: sends a client write that reached a follower on to the leader's client
// endpoint, as the etcd v3 call it came from, and hands back the leader's answer.
//
// The forwarded call carries the metadata "epoch-forwarded: 1"; a node that receives a forwarded
// write and is not the leader answers "not leader" instead of forwarding again, so a message
// never loops between two nodes that disagree about the leader.
//
// Threading: thread-safe; channels are created lazily and shared.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "epoch/server/node_config.h"
#include "epoch/status.h"
#include "lease_forwarder.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

inline constexpr char kForwardedMetadata[] = "epoch-forwarded";

class LeaderForwarder {
 public:
  using Callback = std::function<void(const Status&, const v1::InternalResponse&)>;

  explicit LeaderForwarder(const NodeConfig& config) : config_(config), leases_(config) {}

  // `done` runs on a gRPC client thread. Requests of a kind that cannot be forwarded fail with
  // Unavailable "etcdserver: not leader". Lease grants and revokes go through LeaseForwarder.
  void Forward(NodeId leader, const v1::InternalRequest& request,
               std::chrono::system_clock::time_point deadline, Callback done);

 private:
  etcdserverpb::KV::Stub* StubFor(NodeId leader);

  const NodeConfig& config_;
  std::mutex mu_;
  std::map<NodeId, std::unique_ptr<etcdserverpb::KV::Stub>> stubs_;  // guarded by mu_
  LeaseForwarder leases_;
};

}  // namespace epoch::server
