// RemovalProbe: how a member that the cluster removed learns it when it never applies its removal.
//
// A leader stops replicating to a member once it applies that member's removal, so the removed
// member may never see the commit that covers it: it loses its leader, campaigns, and every
// member drops its frames (PeerFrameGate) — it would run, useless, until an operator stops it.
// (etcd's removed member learns it from its peers' answer, HTTP 410 Gone.) Here a member that has
// known no leader for `quiet` asks its peers, one at a time, over the join handshake
// (peer_join.h) with its member ID; a peer whose member table records that ID as removed —
// committed, so final — answers REMOVED, and the member stops as if it had applied its removal.
// Peers that do not answer, or answer otherwise, change nothing: a partitioned member keeps
// waiting for its leader.
//
// Threading: Start, and the checks, run on `timers` (the peer loop); a probe runs on `pool` (the
// maintenance pool), one at a time. Stop from any thread: a probe in progress asks no further
// peer. The owner stops `timers` and joins `pool` before destroying the probe.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "epoch/node/node_config.h"
#include "epoch/status.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

struct RemovalProbeHooks {
  std::function<NodeId()> leader;  // the leader this member knows; 0 for none
  std::function<std::vector<std::pair<NodeId, HostPort>>()> peers;  // whom to ask, and where
  // One join-handshake request to `peer` at `address`, with a bounded wait.
  std::function<Result<raftpb::JoinResponse>(NodeId peer, const HostPort& address,
                                             const raftpb::JoinRequest& request)>
      ask;
  std::function<void()> on_removed;  // once, on the probing thread
};

struct RemovalProbeOptions {
  NodeId self;
  std::string name;
  std::uint64_t cluster_id = 0;
  std::chrono::milliseconds check_period{1000};
  std::chrono::milliseconds quiet{3000};  // leaderless this long before asking
};

class RemovalProbe {
 public:
  RemovalProbe(asio::io_context& timers, asio::thread_pool& pool, RemovalProbeOptions options,
               RemovalProbeHooks hooks);
  void Start();
  void Stop() { stopped_ = true; }

  [[nodiscard]] std::uint64_t probes() const { return probes_.load(); }

 private:
  void Schedule();
  void Check();
  void Probe();

  asio::steady_timer timer_;
  asio::thread_pool& pool_;
  const RemovalProbeOptions options_;
  const RemovalProbeHooks hooks_;
  std::chrono::steady_clock::time_point leader_seen_;  // timers' thread only
  std::atomic<bool> probing_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> removed_{false};
  std::atomic<std::uint64_t> probes_{0};
};

}  // namespace epoch::server
