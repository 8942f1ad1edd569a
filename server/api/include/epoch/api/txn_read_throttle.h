// TxnReadThrottle: a client whose txns keep being refused for --max-txn-read-keys before the log
// (KvStore::PrecheckTxnReads) is slowed down. Each refusal costs up to --max-txn-read-keys key
// visits on the read pool, which serves every member's reads, so refusals are limited per client
// address over all its connections (rpc::ClientPeers) with epoch/failure_buckets.h
// (--txn-read-refusal-burst, --txn-read-refusal-refill-ms, --txn-read-refusal-backoff-max-ms):
// past them, its txns that need the count are refused at once with etcd's own RESOURCE_EXHAUSTED
// error etcd_errors::kTooManyRequests (which etcd clients back off from), counted in
// epoch_txn_read_limit_throttled_total. Txns that
// pass the count give their token back, so a client whose txns are within the bound is never
// slowed; neither are txns that need no count.
//
// Threading: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "epoch/failure_buckets.h"
#include "epoch/metrics_text.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/rpc/client_peers.h"
#include "epoch/status.h"

namespace epoch::server {

class TxnReadThrottle {
 public:
  TxnReadThrottle(const FailureLimits& limits, const rpc::ClientPeers& peers)
      : limiter_(limits), peers_(peers) {}

  // The caller's key: its address, whichever connection it came on.
  [[nodiscard]] std::string KeyOf(const rpc::CallContext& ctx) const;
  // Whether the caller's next count may run; if so Finish must follow with its outcome. A refusal
  // is counted.
  [[nodiscard]] bool Admit(const std::string& key);
  void Finish(const std::string& key, const Status& precheck);

  void RenderMetrics(MetricsText& m) const;

 private:
  FailureLimiter limiter_;
  const rpc::ClientPeers& peers_;
  std::atomic<std::uint64_t> throttled_{0};
};

}  // namespace epoch::server
