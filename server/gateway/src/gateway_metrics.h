// The gateway's counters: requests by route and HTTP status, open streams, streams cut for a
// slow reader, connections dropped (a head or body that did not arrive in time or was malformed).
// The route label is the route's /v3/ path, "/version" or "other", so the label set is bounded.
//
// Threading: every method from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "epoch/metrics_text.h"

namespace epoch::gateway {

class GatewayMetrics {
 public:
  void Request(std::string path_label, int code) {
    std::lock_guard lock(mu_);
    ++requests_[{std::move(path_label), code}];
  }
  std::atomic<std::int64_t> streams{0};
  std::atomic<std::uint64_t> streams_cut{0};
  std::atomic<std::uint64_t> dropped{0};

  void Render(MetricsText& m) const {
    m.Header("epoch_gateway_requests_total", "counter",
             "HTTP/JSON gateway requests answered, by route and HTTP status.");
    {
      std::lock_guard lock(mu_);
      for (const auto& [key, n] : requests_) {
        m.Sample("epoch_gateway_requests_total",
                 {{"path", key.first}, {"code", std::to_string(key.second)}}, n);
      }
    }
    m.Gauge("epoch_gateway_streams", "Gateway streams open (watch, keep-alive, snapshot, observe).",
            streams.load(std::memory_order_relaxed));
    m.Counter("epoch_gateway_streams_cut_total",
              "Gateway streams cut because their client read slower than they produced.",
              streams_cut.load(std::memory_order_relaxed));
    m.Counter("epoch_gateway_connections_dropped_total",
              "Gateway connections closed without an answer: malformed, too slow or reset.",
              dropped.load(std::memory_order_relaxed));
  }

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;  // guarded by mu_
};

}  // namespace epoch::gateway
