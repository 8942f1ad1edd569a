// The cluster-wide timing (docs/timing-and-safety.md §12): the tick, the heartbeat interval, the
// election timeout (the floor T0) and the clock drift bound ρ, kept in the replicated state so
// that every member runs the same values. The first leader proposes its settings with if_unset
// (should two such proposals apply, the first wins); epoch.v1.Settings/SetTiming changes it later.
// The record keeps the setting it replaced too: a member restarting soon after a lower election
// timeout was applied withholds its vote for the longer one (raft::Config::boot_withhold_ticks).
//
// Thread-safety: pure functions over immutable records.
#pragma once

#include <memory>
#include <string>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"

namespace epoch::server {

// Null until the cluster has recorded its timing.
using ClusterTimingPtr = std::shared_ptr<const v1::StoredClusterTiming>;

inline constexpr std::int64_t kMaxTickMs = 1000;

// Whether a cluster may run `timing`: a tick of 1 to 1000 ms; a heartbeat interval and an
// election timeout that are positive multiples of it, with at least three heartbeats per election
// timeout; a drift bound in [0, 1). With a record, the tick must be the recorded one: every
// duration the members exchange is counted in ticks, so it cannot change while the cluster runs.
// InvalidArgument names the rule and the values.
Status ValidateClusterTiming(const v1::TimingSettings& timing,
                             const v1::StoredClusterTiming* recorded);

// The record once `request`, applied at log index `index`, is taken into account; `*changed`
// tells whether it differs from `recorded` (an if_unset request on a recorded cluster, or the
// same values again, change nothing). The caller has validated the request.
ClusterTimingPtr WithClusterTiming(const ClusterTimingPtr& recorded,
                                   const v1::SetClusterTiming& request, LogIndex index,
                                   bool* changed);

[[nodiscard]] bool SameTiming(const v1::TimingSettings& a, const v1::TimingSettings& b);

// "tick 10 ms, heartbeat 50 ms, election timeout 150 ms, max clock drift 0.05".
[[nodiscard]] std::string DescribeTiming(const v1::TimingSettings& timing);

}  // namespace epoch::server
