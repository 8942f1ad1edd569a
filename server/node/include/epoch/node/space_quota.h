// SpaceQuota: this member's side of --quota-backend-bytes (etcd's quotaKVServer and its
// NOSPACE alarm), server/README.md "Alarms and the space quota".
//
// - Admit(): before a request that needs space is proposed (NodeContext::Write), refuses it with
//   etcd_errors::kNoSpace when this member's store plus the request's cost
//   would reach the quota, and raises this member's NOSPACE alarm.
// - A periodic check (Start/Stop) raises the alarm when the store has reached the quota through
//   writes that came in on other members, so every member over its quota is listed.
// The alarm is a Raft entry: once applied, every replica refuses puts, txns with puts and lease
// grants deterministically (alarms.h) until an operator disarms it.
//
// The store's size is sampled at most every 100 ms (two RocksDB properties), so the check costs
// a put two atomic loads.
//
// Threading: thread-safe. The periodic check runs on the node's read pool; Stop() before the
// pool is joined.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "epoch/etcd_errors.h"
#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/node/periodic_task.h"

namespace epoch::server {

class SpaceQuota {
 public:
  // quota_bytes <= 0: no quota (Admit always true, no checks).
  SpaceQuota(NodeContext& node, std::int64_t quota_bytes,
             std::chrono::milliseconds check_interval = std::chrono::seconds(1));
  ~SpaceQuota();  // calls Stop()
  SpaceQuota(const SpaceQuota&) = delete;
  SpaceQuota& operator=(const SpaceQuota&) = delete;

  void Start();
  void Stop();  // idempotent

  static constexpr std::int64_t kSampleEveryNs = 100'000'000;

  // Whether `request` may be proposed: it needs no space (SpaceCost 0), or its cost fits under
  // the quota. When not, this member's NOSPACE alarm is being raised. Without a quota the
  // request is not even measured.
  bool Admit(const v1::InternalRequest& request);

  [[nodiscard]] std::int64_t quota_bytes() const { return quota_bytes_; }
  // The store's size, sampled at most every 100 ms.
  std::int64_t SizeBytes();
  // The quota's part of /metrics: the store's size and the quota.
  void RenderMetrics(MetricsText& m);

 private:
  void Check();
  // Samples the store's size now (not cached).
  std::int64_t SampleNow();
  // Proposes ACTIVATE NOSPACE for this member unless it is active or a proposal is pending.
  void Raise(std::int64_t size);

  NodeContext& node_;
  const std::int64_t quota_bytes_;
  std::atomic<std::int64_t> size_bytes_{0};
  // steady_clock ns of the last sample; the first call samples (the clock starts at >= 0).
  std::atomic<std::int64_t> sampled_at_ns_{-kSampleEveryNs};
  std::atomic<bool> raising_{false};
  PeriodicTask checks_;  // last: stopped before the rest is destroyed
};

}  // namespace epoch::server
