// PeerMetrics: etcd's per-peer network metrics (rafthttp/metrics.go) for the members of the
// initial cluster, fed by the daemon where frames meet the peer transport:
//
//   etcd_network_peer_sent_bytes_total{To}        bytes of frames handed to the transport
//                                                 (length prefix included)
//   etcd_network_peer_received_bytes_total{From}  bytes of frames received
//   etcd_network_peer_sent_failures_total{To}     frames the transport dropped (queue full,
//                                                 peer unreachable)
//   etcd_network_peer_round_trip_time_seconds{To} heartbeat to its answer, matched by round
//   etcd_server_heartbeat_send_failures_total     heartbeats dropped before reaching the socket
//
// Peer IDs are rendered as etcd does, in lower-case hex. The round trip is measured by the leader
// (the member that sends heartbeats); followers keep the series at zero observations. etcd's
// prober measures it on every member over a separate HTTP probe.
//
// Threading: every method is thread-safe (atomics and a per-peer mutex for the pending
// heartbeat). The set of peers is fixed at construction; unknown IDs are ignored.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "epoch/metrics_text.h"
#include "epoch/strong_int.h"

namespace epoch::server {

class PeerMetrics {
 public:
  explicit PeerMetrics(const std::vector<NodeId>& peers);

  void Sent(NodeId to, std::size_t frame_bytes);
  void Received(NodeId from, std::size_t frame_bytes);
  // A heartbeat of `round` handed to the transport at `now`; the first outstanding one per peer
  // is timed.
  void HeartbeatSent(NodeId to, std::uint64_t round, std::chrono::steady_clock::time_point now);
  void HeartbeatAnswered(NodeId from, std::uint64_t round,
                         std::chrono::steady_clock::time_point now);
  void HeartbeatSendFailed() { heartbeat_send_failures_.fetch_add(1, std::memory_order_relaxed); }
  // `dropped(peer)` gives the transport's dropped-frame count for a peer.
  template <typename DroppedFn>
  void Render(MetricsText& m, DroppedFn dropped) const {
    RenderCounters(m);
    m.Header("etcd_network_peer_sent_failures_total", "counter",
             "The total number of send failures from peers.");
    for (const auto& [id, peer] : peers_) {
      m.Sample("etcd_network_peer_sent_failures_total", {{"To", Hex(id)}}, dropped(id));
    }
  }

  static std::string Hex(NodeId id);

 private:
  struct Peer {
    std::atomic<std::uint64_t> sent_bytes{0};
    std::atomic<std::uint64_t> received_bytes{0};
    std::mutex mu;
    std::uint64_t timed_round = 0;                      // guarded by mu; 0: none outstanding
    std::chrono::steady_clock::time_point timed_since;  // guarded by mu
    // etcd's buckets: ExponentialBuckets(0.0001, 2, 14), 100 µs to 0.8192 s.
    Histogram rtt{Histogram::ExponentialBuckets(0.0001, 2, 14)};
  };

  Peer* Find(NodeId id) const;
  void RenderCounters(MetricsText& m) const;

  std::map<NodeId, std::unique_ptr<Peer>> peers_;  // fixed after construction
  std::atomic<std::uint64_t> heartbeat_send_failures_{0};
};

}  // namespace epoch::server
