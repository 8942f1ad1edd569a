#include "peer_metrics.h"

#include <fmt/format.h>

namespace epoch::server {

// A heartbeat unanswered for this long stops being timed (its answer was lost), so a later round
// can be.
constexpr std::chrono::seconds kGiveUp{10};

PeerMetrics::PeerMetrics(const std::vector<NodeId>& peers) {
  for (NodeId id : peers) peers_.emplace(id, std::make_unique<Peer>());
}

std::string PeerMetrics::Hex(NodeId id) { return fmt::format("{:x}", id.value()); }

PeerMetrics::Peer* PeerMetrics::Find(NodeId id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : it->second.get();
}

void PeerMetrics::Sent(NodeId to, std::size_t frame_bytes) {
  if (Peer* p = Find(to)) p->sent_bytes.fetch_add(frame_bytes, std::memory_order_relaxed);
}

void PeerMetrics::Received(NodeId from, std::size_t frame_bytes) {
  if (Peer* p = Find(from)) p->received_bytes.fetch_add(frame_bytes, std::memory_order_relaxed);
}

void PeerMetrics::HeartbeatSent(NodeId to, std::uint64_t round,
                                std::chrono::steady_clock::time_point now) {
  Peer* p = Find(to);
  if (p == nullptr) return;
  std::lock_guard lock(p->mu);
  if (p->timed_round != 0 && now - p->timed_since < kGiveUp) return;
  p->timed_round = round;
  p->timed_since = now;
}

void PeerMetrics::HeartbeatAnswered(NodeId from, std::uint64_t round,
                                    std::chrono::steady_clock::time_point now) {
  Peer* p = Find(from);
  if (p == nullptr) return;
  std::lock_guard lock(p->mu);
  if (p->timed_round == 0 || round != p->timed_round) return;
  p->rtt.Observe(now - p->timed_since);
  p->timed_round = 0;
}

void PeerMetrics::RenderCounters(MetricsText& m) const {
  m.Header("etcd_network_peer_sent_bytes_total", "counter",
           "The total number of bytes sent to peers.");
  for (const auto& [id, p] : peers_) {
    m.Sample("etcd_network_peer_sent_bytes_total", {{"To", Hex(id)}},
             p->sent_bytes.load(std::memory_order_relaxed));
  }
  m.Header("etcd_network_peer_received_bytes_total", "counter",
           "The total number of bytes received from peers.");
  for (const auto& [id, p] : peers_) {
    m.Sample("etcd_network_peer_received_bytes_total", {{"From", Hex(id)}},
             p->received_bytes.load(std::memory_order_relaxed));
  }
  m.Header("etcd_network_peer_round_trip_time_seconds", "histogram",
           "Round-Trip-Time histogram between peers.");
  for (const auto& [id, p] : peers_) {
    m.HistogramSamples("etcd_network_peer_round_trip_time_seconds", {{"To", Hex(id)}}, p->rtt);
  }
  m.Counter(
      "etcd_server_heartbeat_send_failures_total",
      "The total number of leader heartbeat send failures (likely overloaded from slow disk).",
      heartbeat_send_failures_.load(std::memory_order_relaxed));
}

}  // namespace epoch::server
