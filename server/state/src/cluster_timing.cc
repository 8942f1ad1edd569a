#include "epoch/state/cluster_timing.h"

#include <fmt/format.h>

namespace epoch::server {

namespace {

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

}  // namespace

Status ValidateClusterTiming(const v1::TimingSettings& t, const v1::StoredClusterTiming* recorded) {
  if (t.tick_ms() < 1 || t.tick_ms() > kMaxTickMs) {
    return Invalid(fmt::format("tick {} ms is outside [1, {}] ms", t.tick_ms(), kMaxTickMs));
  }
  if (recorded != nullptr && t.tick_ms() != recorded->current().tick_ms()) {
    return Invalid(fmt::format(
        "the tick cannot change while the cluster runs (recorded {} ms, asked {} ms): every "
        "duration members exchange is counted in ticks",
        recorded->current().tick_ms(), t.tick_ms()));
  }
  if (t.heartbeat_ms() < t.tick_ms() || t.heartbeat_ms() % t.tick_ms() != 0) {
    return Invalid(
        fmt::format("heartbeat interval {} ms must be a positive multiple of the tick "
                    "({} ms)",
                    t.heartbeat_ms(), t.tick_ms()));
  }
  if (t.election_timeout_ms() % t.tick_ms() != 0) {
    return Invalid(fmt::format("election timeout {} ms must be a multiple of the tick ({} ms)",
                               t.election_timeout_ms(), t.tick_ms()));
  }
  if (3 * t.heartbeat_ms() > t.election_timeout_ms()) {
    return Invalid(fmt::format(
        "election timeout {} ms must be at least three heartbeat intervals ({} ms): a follower "
        "must see at least three heartbeats per election timeout",
        t.election_timeout_ms(), 3 * t.heartbeat_ms()));
  }
  if (!(t.max_clock_drift() >= 0.0 && t.max_clock_drift() < 1.0)) {
    return Invalid(fmt::format("max clock drift {} is outside [0, 1)", t.max_clock_drift()));
  }
  return Status::Ok();
}

ClusterTimingPtr WithClusterTiming(const ClusterTimingPtr& recorded,
                                   const v1::SetClusterTiming& request, LogIndex index,
                                   bool* changed) {
  *changed = false;
  if (recorded != nullptr &&
      (request.if_unset() || SameTiming(recorded->current(), request.timing()))) {
    return recorded;
  }
  auto next = std::make_shared<v1::StoredClusterTiming>();
  *next->mutable_current() = request.timing();
  if (recorded != nullptr) *next->mutable_previous() = recorded->current();
  next->set_index(index.value());
  *changed = true;
  return next;
}

bool SameTiming(const v1::TimingSettings& a, const v1::TimingSettings& b) {
  return a.tick_ms() == b.tick_ms() && a.heartbeat_ms() == b.heartbeat_ms() &&
         a.election_timeout_ms() == b.election_timeout_ms() &&
         a.max_clock_drift() == b.max_clock_drift();
}

std::string DescribeTiming(const v1::TimingSettings& t) {
  return fmt::format("tick {} ms, heartbeat {} ms, election timeout {} ms, max clock drift {}",
                     t.tick_ms(), t.heartbeat_ms(), t.election_timeout_ms(), t.max_clock_drift());
}

}  // namespace epoch::server
