#include "epoch/raft/config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace epoch::raft {

namespace {

// raft/DESIGN.md §4: lease <= floor / (1 + ρ) - ε. The follower's clock may run up to (1 + ρ)
// times faster than the leader's, and ε (>= 1 tick) absorbs tick quantization.
std::int64_t DerivedLease(std::int64_t floor, double drift, std::int64_t margin) {
  const double bound = static_cast<double>(floor) / (1.0 + drift);
  return static_cast<std::int64_t>(std::floor(bound)) - margin;
}

}  // namespace

std::int64_t Config::MaxSafeLeaseTicks() const {
  return DerivedLease(election_timeout_min_ticks, max_clock_drift, lease_margin_ticks);
}

std::int64_t Config::EffectiveLeaseTicks() const {
  return LeaseTicksFor(election_timeout_min_ticks);
}

std::int64_t Config::LeaseTicksFor(std::int64_t floor) const {
  if (mutations.lease_without_drift_margin) return floor;
  const std::int64_t derived = DerivedLease(floor, max_clock_drift, lease_margin_ticks);
  return lease_ticks != 0 ? std::min(lease_ticks, derived) : derived;
}

Timing Config::timing() const {
  return Timing{heartbeat_ticks, election_timeout_min_ticks, election_jitter_ticks,
                max_election_timeout_ticks, max_clock_drift};
}

void Config::SetTiming(const Timing& timing) {
  heartbeat_ticks = timing.heartbeat_ticks;
  election_timeout_min_ticks = timing.election_timeout_min_ticks;
  election_jitter_ticks = timing.election_jitter_ticks;
  max_election_timeout_ticks = timing.max_election_timeout_ticks;
  max_clock_drift = timing.max_clock_drift;
}

std::int64_t Config::EffectiveTransferTimeoutTicks() const {
  return transfer_timeout_ticks != 0 ? transfer_timeout_ticks : election_timeout_min_ticks;
}

namespace {

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

Status ValidateTiming(const Config& c) {
  if (c.heartbeat_ticks < 1) {
    return Invalid(fmt::format("heartbeat_ticks ({}) must be at least 1", c.heartbeat_ticks));
  }
  if (c.heartbeat_ticks * 3 > c.election_timeout_min_ticks) {
    return Invalid(fmt::format(
        "heartbeat_ticks ({}) must be at most election_timeout_min_ticks / 3 ({:.1f}): a follower "
        "must see at least three heartbeats per election floor, or it times out spuriously",
        c.heartbeat_ticks, static_cast<double>(c.election_timeout_min_ticks) / 3.0));
  }
  if (c.election_jitter_ticks < 1) {
    return Invalid(fmt::format(
        "election_jitter_ticks ({}) must be at least 1: without randomization, split votes repeat",
        c.election_jitter_ticks));
  }
  if (c.election_tie_window_ticks < 0 ||
      c.election_tie_window_ticks >= c.election_timeout_min_ticks) {
    return Invalid(fmt::format(
        "election_tie_window_ticks ({}) must be in [0, election_timeout_min_ticks ({})): a tie "
        "between pre-candidates is broken within one round trip, far below the floor",
        c.election_tie_window_ticks, c.election_timeout_min_ticks));
  }
  if (c.max_election_timeout_ticks < c.election_timeout_min_ticks) {
    return Invalid(fmt::format(
        "max_election_timeout_ticks ({}) must be at least election_timeout_min_ticks ({}): the "
        "adaptive base never goes below the floor",
        c.max_election_timeout_ticks, c.election_timeout_min_ticks));
  }
  if (!(c.max_clock_drift >= 0.0 && c.max_clock_drift < 1.0)) {
    return Invalid(fmt::format("max_clock_drift ({}) must be in [0, 1)", c.max_clock_drift));
  }
  if (c.lease_margin_ticks < 1) {
    return Invalid(fmt::format(
        "lease_margin_ticks ({}) must be at least 1: one tick of quantization separates a "
        "follower's elapsed-tick count from real time",
        c.lease_margin_ticks));
  }
  const std::int64_t max_lease = c.MaxSafeLeaseTicks();
  if (c.lease_ticks == 0 && max_lease < 1) {
    return Invalid(fmt::format(
        "derived lease floor(election_timeout_min_ticks ({}) / (1 + max_clock_drift ({}))) - "
        "lease_margin_ticks ({}) = {} is below 1 tick: raise the election floor",
        c.election_timeout_min_ticks, c.max_clock_drift, c.lease_margin_ticks, max_lease));
  }
  if (c.lease_ticks < 0 || c.lease_ticks > max_lease) {
    return Invalid(fmt::format(
        "lease_ticks ({}) must be in [0, {}]: a lease longer than floor(election_timeout_min_ticks "
        "({}) / (1 + max_clock_drift ({}))) - lease_margin_ticks ({}) can overlap a newer leader",
        c.lease_ticks, max_lease, c.election_timeout_min_ticks, c.max_clock_drift,
        c.lease_margin_ticks));
  }
  if (c.durability_stall_ticks < 1) {
    return Invalid(
        fmt::format("durability_stall_ticks ({}) must be at least 1", c.durability_stall_ticks));
  }
  if (c.boot_withhold_ticks < 0) {
    return Invalid(
        fmt::format("boot_withhold_ticks ({}) must not be negative", c.boot_withhold_ticks));
  }
  if (c.transfer_timeout_ticks < 0) {
    return Invalid(
        fmt::format("transfer_timeout_ticks ({}) must not be negative", c.transfer_timeout_ticks));
  }
  return Status::Ok();
}

}  // namespace

Status Config::Validate() const {
  if (id == kNoNode) return Invalid("id must not be 0 (0 means \"no node\")");
  EPOCH_RETURN_IF_ERROR(ValidateTiming(*this));
  if (max_inflight_msgs < 1) return Invalid("max_inflight_msgs must be at least 1");
  if (max_inflight_bytes < max_msg_bytes) {
    return Invalid(fmt::format(
        "max_inflight_bytes ({}) must be at least max_msg_bytes ({}): one full message must fit "
        "the in-flight window",
        max_inflight_bytes, max_msg_bytes));
  }
  if (max_msg_bytes < 1) return Invalid("max_msg_bytes must be at least 1");
  if (max_uncommitted_bytes < 1) return Invalid("max_uncommitted_bytes must be at least 1");
  if (max_committed_bytes_per_ready < 1) {
    return Invalid("max_committed_bytes_per_ready must be at least 1");
  }
  return Status::Ok();
}

}  // namespace epoch::raft
