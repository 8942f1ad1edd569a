// The faults of the chaos campaign and how each is injected and healed on a ChaosCluster.
//
// Every fault is held for a seeded duration, then healed; the harness then requires the cluster
// to become healthy again and the workload to make progress (a recovery failure is a violation).
// Killing the leader also measures failover: the time from SIGKILL to the first successful write
// through the client library (epoch::client::Client, retries and leader discovery included).
// Replacing a member measures the time from MemberAdd to the learner's promotion.
//
// Threading: from the harness thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/chaos/chaos_cluster.h"
#include "epoch/chaos/lock_workload.h"
#include "epoch/client/client.h"

namespace epoch::chaos {

enum class FaultKind : std::uint8_t {
  kKillLeader,
  kKillFollower,
  kPauseLeader,  // SIGSTOP longer than the election timeout
  kPauseFollower,
  kPauseWorker,      // SIGSTOP of a fenced worker longer than its lease TTL
  kPartitionNode,    // one node cut from every peer, both directions
  kPartitionOneWay,  // one node's outgoing (or incoming) peer links cut
  kPartitionRing,    // majorities ring: every node still sees a majority, no two see the same
  kIsolateLeader,    // leader cut from its peers; clients still reach it
  kLinkDelay,        // one node's peer links delayed
  kLinkDrop,         // one node's peer links lossy
  kDiskSlow,         // leader's WAL fdatasync slowed
  kDiskStall,        // leader's WAL fdatasync blocked
  kMoveLeader,       // Maintenance.MoveLeader to a follower
  kMemberReplace,    // a voter removed (sometimes the leader), a fresh learner added and promoted
  kTimingChange,     // a new cluster election timeout rolled out under load, then the old one
  kClockSkew,        // one member's tick clock fast or slow within the drift bound ρ
  kCount,
};
inline constexpr int kFaultKinds = static_cast<int>(FaultKind::kCount);

// epochd's --max-clock-drift ρ, which the chaos clusters keep: the clock-skew fault stays within
// it, and the fenced workers' sessions assume it (docs/timing-and-safety.md §1, §8).
inline constexpr double kMaxClockDrift = 0.05;

[[nodiscard]] std::string_view FaultName(FaultKind kind);

// The campaign's fault sequence: shuffled cycles through every kind, the leader kill three times
// per cycle, leader pause and member replacement twice, so any run of one cycle injects every
// kind. With `only` non-empty, the schedule cycles through those kinds alone (e.g. a failover
// measurement of leader kills only). Without `membership` (peer TLS: chaos_cluster.h), the
// default cycle leaves member replacement out.
[[nodiscard]] std::vector<FaultKind> FaultSchedule(std::uint64_t seed, int count,
                                                   const std::vector<FaultKind>& only = {},
                                                   bool membership = true);
// "kill-leader" -> kKillLeader; nullopt for an unknown name.
[[nodiscard]] std::optional<FaultKind> FaultByName(std::string_view name);

struct FaultContext {
  ChaosCluster& cluster;
  LockWorkload& locks;
  client::Client& prober;  // the client whose first successful write ends a failover
  std::mt19937_64& rng;
  std::vector<double>& failover_ms;  // appended by kKillLeader
  std::vector<double>& replace_ms;   // appended by kMemberReplace: MemberAdd to promoted voter
  // Appended by kPauseWorker: the paused holder's lock key read after its lease's deadline plus
  // the published bound (lock_workload.h, CheckLeaseExpiry).
  std::vector<LeaseObservation>& lease_checks;
};

// Injects `kind`, holds it, heals it. Returns what was done ("kill n2 (leader) ..."), or an error
// when the fault could not be injected at all (e.g. no leader to kill).
[[nodiscard]] Result<std::string> InjectAndHeal(FaultKind kind, FaultContext& ctx);

}  // namespace epoch::chaos
