#include "epoch/lease/cluster_clock.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace epoch::server {
namespace {

std::int64_t Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

std::int64_t CeilMs(double ms) { return static_cast<std::int64_t>(std::ceil(ms)); }

}  // namespace

std::int64_t MaxFailoverExtensionMs(const ClockTiming& timing) {
  const double tick_ms = static_cast<double>(timing.tick.count());
  const double election_ms =
      static_cast<double>(timing.max_election_timeout_ticks + timing.election_jitter_ticks) *
      tick_ms * (1.0 + timing.max_clock_drift);
  const double floor_ms = static_cast<double>(timing.election_timeout_min_ticks) * tick_ms;
  return timing.clock_tick_interval.count() + CeilMs(election_ms + floor_ms + tick_ms);
}

std::int64_t MaxExtensionMs(const ClockTiming& timing, std::int64_t ttl_ms) {
  const double drift_ms = static_cast<double>(ttl_ms) * timing.max_clock_drift;
  const std::int64_t floor_ms = timing.election_timeout_min_ticks * timing.tick.count();
  return MaxFailoverExtensionMs(timing) + CeilMs(drift_ms) + timing.expiry_check_interval.count() +
         floor_ms;
}

void ClusterClock::BecomeLeader(Term term, LogIndex first_index) {
  leading_ = true;
  running_ = false;
  term_ = term;
  first_index_ = first_index;
}

void ClusterClock::StepDown() {
  leading_ = false;
  running_ = false;
}

bool ClusterClock::MaybeStart(LogIndex applied, std::int64_t applied_cluster_ms, TimePoint now) {
  if (!leading_ || running_ || applied < first_index_) return false;
  if (observed_) {
    // Local time since the applied clock last moved, minus what it gained meanwhile (the old
    // leader's last stamps, applied by us only now).
    const std::int64_t stood_still =
        Ms(now - observed_changed_at_) - (applied_cluster_ms - observed_ms_);
    last_stall_ms_ = std::max<std::int64_t>(0, stood_still);
  }
  ObserveApplied(applied_cluster_ms, now);
  // Everything an earlier leader could have committed is applied, so the applied clock is the
  // largest stamp that can ever be committed before ours: continue from there
  // (docs/timing-and-safety.md §7).
  running_ = true;
  base_cluster_ms_ = applied_cluster_ms;
  base_time_ = now;
  last_stamp_ms_ = applied_cluster_ms;
  // The first ClockTick goes out one interval after the start; the no-op carried no stamp.
  last_stamp_time_ = now;
  return true;
}

std::int64_t ClusterClock::Now(TimePoint now) const {
  assert(running_);
  return base_cluster_ms_ + std::max<std::int64_t>(0, Ms(now - base_time_));
}

std::int64_t ClusterClock::Stamp(TimePoint now) {
  if (!running_) return 0;
  last_stamp_ms_ = std::max(last_stamp_ms_, Now(now));
  last_stamp_time_ = now;
  return last_stamp_ms_;
}

bool ClusterClock::TickDue(TimePoint now, std::chrono::milliseconds interval) const {
  return running_ && now - last_stamp_time_ >= interval;
}

void ClusterClock::ObserveApplied(std::int64_t applied_cluster_ms, TimePoint now) {
  if (observed_ && applied_cluster_ms <= observed_ms_) return;
  observed_ = true;
  observed_ms_ = applied_cluster_ms;
  observed_changed_at_ = now;
}

std::int64_t ClusterClock::Estimate(TimePoint now,
                                    std::chrono::milliseconds max_extrapolation) const {
  if (running_) return Now(now);
  if (!observed_) return 0;
  const std::int64_t since = std::max<std::int64_t>(0, Ms(now - observed_changed_at_));
  return observed_ms_ + std::min<std::int64_t>(since, max_extrapolation.count());
}

}  // namespace epoch::server
