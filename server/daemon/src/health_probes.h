// HealthProbes: the answers of /health, /readyz and /livez, as etcd gives them (docs/metrics.md
// "Health"):
//
//   /health   {"health":"true"} (200) when all of these hold, else {"health":"false","reason":..}
//             (503): no NOSPACE or CORRUPT alarm is raised; a leader is known; no write to this
//             member's WAL has been waiting to become durable longer than the durability-stall
//             bound; a linearizable read (a ReadIndex round, applied here) completes within
//             kReadTimeout.
//   /readyz   the same checks, answered "ok" or the failed check as text (Kubernetes readiness).
//   /livez    "ok" when the Raft strand runs a posted task within kReadTimeout (the process is
//             not wedged); a stalled disk or a lost quorum does not fail it (Kubernetes
//             liveness must not restart a member for what a restart cannot fix).
//
// Threading: the probes may be started from any thread and answer through `respond` exactly once,
// from the Raft strand or the timer's io_context.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "durability_watch.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/state/kv_store.h"
#include "metrics_http.h"

namespace epoch::server {

class HealthProbes {
 public:
  // etcd's /health read timeout.
  static constexpr std::chrono::seconds kReadTimeout{1};

  HealthProbes(asio::io_context& timer_io, RaftDriver& driver, const KvStore& store,
               const DurabilityWatch& wal, std::chrono::milliseconds stall_bound)
      : io_(timer_io), driver_(driver), store_(store), wal_(wal), stall_bound_(stall_bound) {}

  void Health(MetricsHttp::Respond respond);
  void Ready(MetricsHttp::Respond respond);
  void Live(MetricsHttp::Respond respond);

 private:
  // Calls done("") when healthy, done(reason) otherwise.
  void Check(std::function<void(std::string)> done);
  // The checks that need no round trip; "" when they pass.
  [[nodiscard]] std::string LocalProblem() const;

  asio::io_context& io_;
  RaftDriver& driver_;
  const KvStore& store_;
  const DurabilityWatch& wal_;
  const std::chrono::milliseconds stall_bound_;
};

}  // namespace epoch::server
