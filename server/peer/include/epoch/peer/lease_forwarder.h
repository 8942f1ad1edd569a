// LeaseForwarder: sends lease calls that reached a follower on to the leader's client endpoint.
//
//   - keep-alives as epoch.v1.Lease/Renew (unary; the leader batches them like its own);
//   - lease grants as epoch.v1.Lease/Grant (milliseconds, so no precision is lost; an ID of 0 is
//     left for the leader to choose before it proposes);
//   - lease revokes as etcdserverpb.Lease/LeaseRevoke.
// Every call carries the "epoch-forwarded" metadata (leader_forwarder.h): a node that is not the
// leader answers "not leader" instead of forwarding again.
//
// Threading: thread-safe; channels are created lazily and shared. Calls complete on the
// server's completion-queue threads (rpc::ClientQueue), where the callbacks run; while the queue
// is closed (the server stopping) a call fails at once with "server stopped".
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "epoch/rpc/async_rpc.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "epoch/v1/internal.pb.h"

namespace epoch::server {

class LeaseForwarder {
 public:
  using RenewCallback = std::function<void(const Status&, const v1::LeaseKeepAliveResponse&)>;
  using WriteCallback = std::function<void(const Status&, const v1::InternalResponse&)>;

  // A member's client URL ("https://host:port", "http://host:port" or "host:port"), "" when it
  // is not known (yet).
  using AddressOf = std::function<std::string(NodeId)>;

  // `tls`: the credentials for https:// URLs (rpc::MakeMemberChannelCredentials); null when this
  // member has no client TLS, and then a leader at an https:// URL cannot be reached.
  LeaseForwarder(rpc::ClientQueue& queue, AddressOf address_of,
                 std::shared_ptr<grpc::ChannelCredentials> tls = nullptr)
      : queue_(queue), address_of_(std::move(address_of)), tls_(std::move(tls)) {}

  void Renew(NodeId leader, LeaseId id, std::chrono::system_clock::time_point deadline,
             RenewCallback done);
  // `request` holds lease_grant or lease_revoke; anything else fails with "not leader".
  void ForwardWrite(NodeId leader, const v1::InternalRequest& request,
                    std::chrono::system_clock::time_point deadline, WriteCallback done);

  // The channel to `leader`'s client endpoint (shared by KV and lease forwarding), or null if its
  // address is not known (not a member, or it has not published its client URLs yet) or is
  // https:// without TLS credentials here. TLS for https:// URLs, plaintext otherwise. Reconnects
  // back off from 100 ms to at most 1 s, not gRPC's default 120 s: a restarted member is leader
  // again within an election.
  std::shared_ptr<grpc::Channel> ChannelFor(NodeId leader);

 private:
  rpc::ClientQueue& queue_;
  const AddressOf address_of_;
  const std::shared_ptr<grpc::ChannelCredentials> tls_;
  std::mutex mu_;
  struct Cached {
    std::string address;
    std::shared_ptr<grpc::Channel> channel;
  };
  std::map<NodeId, Cached> channels_;  // guarded by mu_
};

// A forwarded call's gRPC status as an epoch Status: etcd's errors keep their message, an
// unreachable leader is "connection lost" (the write may or may not have been applied).
[[nodiscard]] Status FromForwardedStatus(const grpc::Status& status);

}  // namespace epoch::server
