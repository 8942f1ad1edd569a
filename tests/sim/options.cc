#include "options.h"

#include <fmt/format.h>

namespace epoch::sim {

std::string_view FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kDrop: return "drop";
    case FaultKind::kDelay: return "delay";
    case FaultKind::kDuplicate: return "duplicate";
    case FaultKind::kReorder: return "reorder";
    case FaultKind::kPartitionFull: return "partition-full";
    case FaultKind::kPartitionAsymmetric: return "partition-asymmetric";
    case FaultKind::kPartitionLeaderIsolated: return "partition-leader-isolated";
    case FaultKind::kPartitionMajoritiesRing: return "partition-majorities-ring";
    case FaultKind::kCrash: return "crash-restart";
    case FaultKind::kClockDrift: return "clock-drift";
    case FaultKind::kSlowDisk: return "slow-follower-disk";
    case FaultKind::kStalledLeaderDisk: return "stalled-leader-disk";
    case FaultKind::kLeaderTransfer: return "leader-transfer";
    case FaultKind::kMembershipChange: return "membership-change";
    case FaultKind::kTimingChange: return "timing-change";
  }
  return "?";
}

std::string_view MutationName(Mutation mutation) {
  switch (mutation) {
    case Mutation::kNone: return "none";
    case Mutation::kNoElectionRestriction: return "no_election_restriction";
    case Mutation::kCommitPriorTermByCounting: return "commit_prior_term_by_counting";
    case Mutation::kLeaseWithoutDriftMargin: return "lease_without_drift_margin";
    case Mutation::kVoteWhileLeaderLive: return "vote_while_leader_live";
    case Mutation::kReplyBeforePersist: return "reply_before_persist";
    case Mutation::kReadIndexWithoutQuorum: return "read_index_without_quorum";
    case Mutation::kApplyBeforeDurable: return "apply_before_durable";
    case Mutation::kLeaseFromOwnFloor: return "lease_from_own_floor";
    case Mutation::kLowerFloorWithoutHold: return "lower_floor_without_hold";
  }
  return "?";
}

std::optional<Mutation> ParseMutation(std::string_view name) {
  for (int i = 0; i < kMutationCount; ++i) {
    auto m = static_cast<Mutation>(i);
    if (MutationName(m) == name) return m;
  }
  return std::nullopt;
}

std::string ReproCommand(const SimOptions& options) {
  std::string cmd = fmt::format("build/release/tests/sim/sim_runner --seed={} --nodes={}",
                                options.seed, options.nodes);
  if (options.steps != SimOptions{}.steps) cmd += fmt::format(" --steps={}", options.steps);
  if (options.mutation != Mutation::kNone) {
    cmd += fmt::format(" --mutation={}", MutationName(options.mutation));
  }
  return cmd;
}

}  // namespace epoch::sim
