// PeerForwarder: sends a client write that reached a follower on to the leader over the peer
// link, and serves such writes on the leader (the etcd way: proposals travel with the Raft
// traffic, not as one gRPC call each).
//
// Follower side — Forward(): the write is sent only while the link to the leader is connected;
// otherwise it fails at once with kLeaderUnreachable (NOT sent, so the caller may wait for a
// leader and try again without risking a double apply). Once sent, the write waits for the
// leader's ForwardResponse. If the frame is dropped before it reached the socket (the link failed
// while it was still queued), it was not sent: kLeaderUnreachable again. If the link breaks after
// the frame went out (PeerLost) or the deadline passes, the outcome is unknown and the caller gets
// etcd's "request timed out, possibly due to connection lost" / "request timed out".
//
// Leader side — Serve(): the request is proposed as if a local client had sent it; the answer
// (any Status, including etcd_errors::kNotLeader when this node no longer leads) goes back in a
// ForwardResponse. A frame that does not parse is answered with InvalidArgument. Only voters and
// learners reach Serve (PeerFrameGate checks the connection's member); a member publication that
// speaks for another member than the sender is refused and counted (FrameDrop::kForwardForged).
//
// Forward ids are random 64-bit values (OpenSSL's RAND_bytes), and an answer is taken only from
// the member the write was sent to: a peer cannot guess or answer another link's writes. An
// answer nobody waits for is counted (FrameDrop::kForwardUnknown).
//
// Threading: thread-safe. Callbacks run on the thread that delivered the response (the
// transport's), on the timer executor (deadline), or inside Forward()/PeerLost().
#pragma once

#include <asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "epoch/etcd_errors.h"
#include "epoch/peer/peer_drops.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

class PeerForwarder {
 public:
  using Callback = std::function<void(const Status&, const v1::InternalResponse&)>;
  struct Hooks {
    // Queues a frame for a peer (PeerTransport::Send); the third argument, if set, is called if
    // the frame is dropped before it reached the socket.
    std::function<void(NodeId, std::string, std::function<void()>)> send;
    // Whether the outbound link to a peer is connected right now.
    std::function<bool(NodeId)> connected;
    // Leader side: propose a request locally (RaftDriver::Propose), or refuse it.
    std::function<void(v1::InternalRequest, Callback)> propose;
    // A forward frame refused (optional): counted in /metrics.
    std::function<void(FrameDrop)> on_drop;
  };

  PeerForwarder(asio::any_io_executor timer_executor, Hooks hooks);
  ~PeerForwarder();  // calls Stop()
  PeerForwarder(const PeerForwarder&) = delete;
  PeerForwarder& operator=(const PeerForwarder&) = delete;

  // Pending writes fail with an unknown outcome; later ones with etcd_errors::kStopped.
  // Idempotent.
  void Stop();

  // Follower side.
  void Forward(NodeId leader, const v1::InternalRequest& request,
               std::chrono::steady_clock::time_point deadline, Callback done);
  void HandleResponse(NodeId from, const raftpb::ForwardResponse& response);
  // The link to `peer` broke: writes sent to it have an unknown outcome.
  void PeerLost(NodeId peer);

  // Whether a request of this kind travels this way (KV writes, compaction, alarm changes,
  // member publications, auth changes and lease revokes, which carry their caller's auth stamp;
  // lease grants go through the leader's lease manager, see LeaseForwarder).
  [[nodiscard]] static bool Forwardable(const v1::InternalRequest& request);

  // Leader side: a ForwardRequest from `from`.
  void Serve(NodeId from, const raftpb::ForwardRequest& request);

  [[nodiscard]] std::size_t pending() const;

  // Frame encoding (exposed for tests).
  [[nodiscard]] static std::string EncodeRequest(std::uint64_t id,
                                                 const v1::InternalRequest& request);
  [[nodiscard]] static std::string EncodeResponse(std::uint64_t id, const Status& status,
                                                  const v1::InternalResponse& response);

 private:
  struct Pending {
    NodeId leader;
    std::chrono::steady_clock::time_point deadline;
    Callback done;
  };
  struct Shared;

  Hooks hooks_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace epoch::server
