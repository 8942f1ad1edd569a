// The cluster-wide timing on one member (docs/timing-and-safety.md §12): the tick, the heartbeat
// interval, the election timeout and the clock drift bound are recorded in the replicated state
// (epoch/state/cluster_timing.h), and every member runs the recorded values.
//
// - At start, BootTiming compares the record with this member's settings. A setting given on the
//   command line, in the environment or in the config file that differs from the record refuses
//   the start, naming both values. A setting left at its default takes the recorded value, and
//   the member says so. A record that lowered the election timeout makes the member withhold its
//   vote at start for the one it replaced (raft::Config::boot_withhold_ticks).
// - While it runs, ClusterTimingKeeper records the timing once the cluster first has a leader:
//   the leader proposes its own settings (if_unset) when most voters report its election timeout,
//   and otherwise hands leadership to a voter whose election timeout most voters run. A member
//   whose given settings differ from that first record stops (the `refuse` hook) with the same
//   message as at start (FirstRecordConflict). Every later change (epoch.v1.Settings/SetTiming) is
//   adopted as this member applies it: the Raft core (raft::Node::UpdateTiming, safe in any order
//   across members) and the lease bounds (the `adopt` hook).
//
// Threading: BootTiming before anything runs; the keeper's checks run on `executor`. Stop()
// before the executor's threads are joined.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "epoch/node/node_config.h"
#include "epoch/node/node_context.h"
#include "epoch/node/periodic_task.h"
#include "epoch/raft/config.h"
#include "epoch/raft/log_reader.h"
#include "epoch/state/cluster_timing.h"

namespace epoch::server {

// This member's settings as the record holds them.
[[nodiscard]] v1::TimingSettings TimingSettingsOf(const NodeConfig& config);
// `config`'s Raft timing for `settings`: ticks of its tick, its own election jitter, and the
// adaptive timeout's cap at four election timeouts (as epochd's flags set it).
[[nodiscard]] raft::Timing RaftTimingOf(const NodeConfig& config,
                                        const v1::TimingSettings& settings);
// Whether this member can run `settings`: the record's rules (ValidateClusterTiming) and the Raft
// core's own (raft::Config::Validate with this member's other settings).
[[nodiscard]] Status CheckTimingFor(const NodeConfig& config, const v1::TimingSettings& settings,
                                    const v1::StoredClusterTiming* recorded);

// The refusal for a given setting of `config` that differs from `recorded`, naming the flag and
// both values; nullopt when every given setting matches.
[[nodiscard]] std::optional<std::string> GivenTimingConflict(const NodeConfig& config,
                                                             const v1::TimingSettings& recorded);

// The first record a running member sees, when its start found none: the refusal when it is the
// cluster's first record (no previous setting) and a given setting differs from it. A change is
// adopted instead: the member's store was behind its log when it started, and the cluster changed
// its timing with SetTiming since (its next start compares its flags with the record).
[[nodiscard]] std::optional<std::string> FirstRecordConflict(
    const NodeConfig& config, const v1::StoredClusterTiming& recorded);

// Start: adopts the record (if any) into `config`. InvalidArgument with GivenTimingConflict's
// message when a given setting differs. Returns the notice to log when a default was replaced.
[[nodiscard]] Result<std::optional<std::string>> BootTiming(
    NodeConfig* config, const v1::StoredClusterTiming* recorded);

// What a member's log holds past its store's applied index (the store is written without sync:
// the log is what is durable), read in one pass at start.
struct LoggedTiming {
  // `recorded` (the store's record, may be null) with the log's cluster timing entries applied on
  // top, as the state machine will apply them: what the member compares its flags with.
  ClusterTimingPtr latest;
  // The longest election timeout (ms) among those entries; 0 when there are none. The member may
  // have applied such an entry, and answered its leader with that timeout, just before it stopped:
  // at start it withholds its vote that long (raft::Config::boot_withhold_ticks).
  std::int64_t longest_election_timeout_ms = 0;
};
[[nodiscard]] LoggedTiming ScanLoggedTiming(const raft::LogReader& log, LogIndex applied,
                                            ClusterTimingPtr recorded);

class ClusterTimingKeeper {
 public:
  struct Hooks {
    // Adopt `timing` (the core and the lease bounds); on the keeper's executor.
    std::function<void(const raft::Timing& timing)> adopt;
    // Stop the member: its given settings differ from the cluster's first record.
    std::function<void(const std::string& why)> refuse;
  };

  // `booted`: the record BootTiming saw (null: none yet).
  ClusterTimingKeeper(NodeContext& node, ClusterTimingPtr booted, Hooks hooks,
                      std::chrono::milliseconds period = std::chrono::milliseconds(100));
  ~ClusterTimingKeeper();  // calls Stop()
  ClusterTimingKeeper(const ClusterTimingKeeper&) = delete;
  ClusterTimingKeeper& operator=(const ClusterTimingKeeper&) = delete;

  void Start();
  void Stop();  // idempotent

 private:
  void Check();
  void ProposeOwn();

  NodeContext& node_;
  Hooks hooks_;
  ClusterTimingPtr seen_;  // executor only: the record last adopted
  std::atomic<bool> proposing_{false};
  PeriodicTask checks_;  // last: stopped before the rest is destroyed
};

}  // namespace epoch::server
