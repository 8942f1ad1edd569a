// Options of one simulated run and its result, shared by the Simulation, sim_runner and the
// sim_tests suite.
//
// Threading: plain values.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checker.h"
#include "epoch/lincheck/history.h"

namespace epoch::sim {

// Every kind of fault the nemesis injects. Each run prints how many of each it injected.
enum class FaultKind : std::uint8_t {
  kDrop,                     // links lose a share of their messages
  kDelay,                    // links get slow
  kDuplicate,                // links deliver some messages twice
  kReorder,                  // links get a wide delay jitter: messages overtake each other
  kPartitionFull,            // two groups cut from each other in both directions
  kPartitionAsymmetric,      // A -> B cut while B -> A works
  kPartitionLeaderIsolated,  // leader cut from its followers, still reachable by clients
  kPartitionMajoritiesRing,  // every node sees a majority, no two the same one
  kCrash,                    // crash, then restart from the durable log after a while
  kClockDrift,               // a node's clock rate changes (rates stay within ρ)
  kSlowDisk,                 // a follower's writes take much longer
  kStalledLeaderDisk,        // the leader's disk completes nothing for a while
  kLeaderTransfer,           // TransferLeadership to a random voter
  kMembershipChange,         // remove a voter / add it back as a learner / promote it
  kTimingChange,             // a new election floor reaches each node at its own moment
};
inline constexpr int kFaultKindCount = 15;
[[nodiscard]] std::string_view FaultKindName(FaultKind kind);

// Deliberate bugs in the core (raft::Config::Mutations), to show the checkers can fail.
enum class Mutation : std::uint8_t {
  kNone,
  kNoElectionRestriction,
  kCommitPriorTermByCounting,
  kLeaseWithoutDriftMargin,
  kVoteWhileLeaderLive,
  kReplyBeforePersist,
  kReadIndexWithoutQuorum,
  kApplyBeforeDurable,
  kLeaseFromOwnFloor,
  kLowerFloorWithoutHold,
};
inline constexpr int kMutationCount = 10;
[[nodiscard]] std::string_view MutationName(Mutation mutation);
[[nodiscard]] std::optional<Mutation> ParseMutation(std::string_view name);

struct SimOptions {
  std::uint64_t seed = 1;
  int nodes = 3;                // 3 or 5
  std::uint64_t steps = 60000;  // steps (events) of the fault phase
  Mutation mutation = Mutation::kNone;
  bool verbose = false;  // print a trace of faults and leader changes
  // Simulated microseconds per tick of a node's clock at rate 1.
  std::int64_t tick_us = 10000;
};

struct RunResult {
  std::uint64_t seed = 0;
  int nodes = 0;
  Mutation mutation = Mutation::kNone;
  std::uint64_t steps = 0;
  std::int64_t sim_time_us = 0;
  std::array<std::uint64_t, kFaultKindCount> faults{};
  std::uint64_t ops_checked = 0;          // client operations handed to the linearizability checker
  std::uint64_t ops_unknown = 0;          // of which never returned (timeouts) ...
  std::uint64_t ops_unknown_dropped = 0;  // ... and were never applied anywhere: left out
  std::uint64_t ops_unknown_resolved = 0;  // ... and were applied: return time = first apply
  std::uint64_t serializable_reads = 0;
  std::uint64_t lease_reads = 0;
  std::uint64_t read_index_reads = 0;
  std::uint64_t elections = 0;            // terms that had a leader
  std::uint64_t compactions = 0;          // log compactions (state-machine snapshots taken)
  std::uint64_t snapshots_installed = 0;  // InstallSnapshot applied by a follower
  std::uint64_t lincheck_steps = 0;
  double wall_seconds = 0;  // host time the run took (not part of the deterministic result)
  std::int64_t liveness_leader_us = -1;   // heal -> leader able to commit
  std::int64_t min_lease_margin_us = -1;  // -1 if never measured
  lincheck::Verdict lincheck = lincheck::Verdict::kOk;
  std::vector<Violation> violations;

  [[nodiscard]] bool ok() const { return violations.empty(); }
};

// The one command that reproduces a run.
[[nodiscard]] std::string ReproCommand(const SimOptions& options);

}  // namespace epoch::sim
