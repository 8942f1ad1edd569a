// PeerFrameGate: every frame received on the peer port passes here before anything acts on it.
//
// The sender of a frame is the member the connection's hello named (the transport's `from`),
// never a field the sender fills in. A frame is dropped, and counted in PeerDrops, when:
//   - it does not parse, or carries no known body;
//   - `from` is not a voter or learner of the current configuration (never was one, or removed);
//     except that a member removed while its connection was open may still deliver the frames
//     its removal itself causes, which race the removal's commit: the answers to writes
//     forwarded to it (the PeerForwarder takes an answer only for a write it sent to that
//     member) and a removed leader's TimeoutNow handing leadership over (still only from the
//     leader of this node's current term);
//   - a Raft message names another sender than `from`, or another recipient than this node;
//   - the message does not decode (peer_codec: unknown type, a term or index >= 2^62, ...);
//   - it is a TimeoutNow and `from` is not the leader of this node's current term (the Raft core
//     checks this too; the gate counts it).
// What passes is routed: Raft messages to the driver, snapshot chunks and their
// acknowledgements to the snapshot manager (which accepts chunks only from the current leader),
// forwarded writes and their answers to the PeerForwarder (which checks what they speak for).
//
// Threading: Handle() runs on the transport's threads; SetMembers() and IsMember() are
// thread-safe. The routes and the `leader` hook must be thread-safe and must not block.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "epoch/peer/peer_drops.h"
#include "epoch/raft/message.h"
#include "epoch/raft/types.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

class PeerFrameGate {
 public:
  struct Routes {
    std::function<void(raft::Message)> raft;
    // INSTALL_SNAPSHOT chunks and INSTALL_SNAPSHOT_RESPONSE acknowledgements, sender checked.
    std::function<void(raftpb::Message)> snapshot;
    std::function<void(NodeId, const raftpb::ForwardRequest&)> forward_request;
    std::function<void(NodeId, const raftpb::ForwardResponse&)> forward_response;
    // The leader this node knows of and its current term (RaftDriver::status()).
    std::function<std::pair<NodeId, Term>()> leader;
  };

  PeerFrameGate(NodeId self, std::vector<NodeId> members, PeerDrops& drops, Routes routes);

  // The configuration's voters and learners (the driver's applied conf_state).
  void SetMembers(const raft::ConfState& conf);
  // Whether `id` may talk to this node: a voter or learner, and not this node itself.
  [[nodiscard]] bool IsMember(NodeId id) const;
  // Removed members remembered for their last frames (the most recent kMaxDeparted).
  static constexpr std::size_t kMaxDeparted = 16;

  // One frame from the member `from` (the connection's hello).
  void Handle(NodeId from, std::string_view frame);

 private:
  void HandleMessage(NodeId from, raftpb::Message message, bool departed);
  [[nodiscard]] bool IsDeparted(NodeId id) const;
  void Drop(FrameDrop reason, NodeId from, std::string_view detail);

  const NodeId self_;
  PeerDrops& drops_;
  const Routes routes_;
  mutable std::mutex mu_;
  std::set<NodeId> members_;     // guarded by mu_
  std::deque<NodeId> departed_;  // guarded by mu_; oldest first
};

}  // namespace epoch::server
