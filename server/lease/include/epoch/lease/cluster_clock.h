// ClusterClock: the replicated cluster clock of docs/timing-and-safety.md §7, as one node sees it.
//
// The cluster clock is a number of milliseconds carried in Raft log entries
// (`InternalRequest.cluster_time_ms`); the state machine's clock is the largest stamp it applied
// (server/README.md), so it never runs backwards. Lease deadlines live on it. Only the leader
// stamps, with this class:
//   - on becoming leader the clock is *not* running. It starts once the state machine has applied
//     the first entry of the new term (the leader's no-op), i.e. every entry any earlier leader
//     could have committed, and it continues from the applied cluster time — never from wall-clock
//     time, never from zero, never resetting a TTL to full;
//   - while running, Now() = the cluster time it started from + the leader's monotonic time since;
//     stamps never decrease;
//   - before it runs, proposals are stamped 0, which the state machine ignores (max rule): a lease
//     granted or renewed then gets a deadline from the last applied time, i.e. an earlier one —
//     the safe direction;
//   - an idle leader proposes a ClockTick whenever it has not stamped anything for the clock-tick
//     interval, so the committed clock trails the leader's by at most that interval plus a commit.
// Cluster time stands still between the old leader's last committed stamp and the moment the new
// leader's clock starts. That is how much a failover extends every lease; MaxFailoverExtensionMs()
// bounds it (derivation next to the function) and the stall observed on this node is recorded.
//
// Every node also tracks the applied cluster time to estimate "now" for TimeToLive on followers.
//
// Threading: not thread-safe; the lease manager uses it on the Raft driver's strand. Time is
// passed in (no clock is read here), so tests drive it explicitly.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "epoch/strong_int.h"

namespace epoch::server {

// The timing a published extension bound is computed from (NodeConfig + lease options).
struct ClockTiming {
  std::chrono::milliseconds tick{10};
  std::int64_t election_timeout_min_ticks = 15;
  std::int64_t max_election_timeout_ticks = 60;
  std::int64_t election_jitter_ticks = 15;
  double max_clock_drift = 0.05;
  // An idle leader proposes a ClockTick after this long without a stamped proposal.
  std::chrono::milliseconds clock_tick_interval{100};
  // The leader looks for expired leases this often.
  std::chrono::milliseconds expiry_check_interval{20};
};

// Upper bound on the cluster time lost in one leader failover (every lease's deadline moves that
// much later in real time), assuming the first election after the failure succeeds.
//
// Derivation. The old leader stamps a proposal at least every clock_tick_interval I and a
// proposal commits within c, so its last committed stamp was taken at most I + c before it died.
// Followers stop hearing heartbeats at the death; each starts an election after its randomized
// timeout, at most (max_election_timeout + jitter) ticks of its own clock, i.e. up to (1 + ρ)
// times that in real time. Pre-vote, vote, the new leader's no-op commit and apply take a few
// round trips and fsyncs, which the timing rules keep far below the election floor T0
// (docs/timing-and-safety.md §2: T0 ≫ p99 fsync + RTT); T0 covers them, including c above. One
// tick of quantization. So:
//   bound = I + (max_election_timeout + jitter) · tick · (1 + ρ) + T0 + tick.
// Each further failed election round (split vote, partition) adds up to one more election timeout;
// cluster time also stands still while there is no leader at all. Both only delay expiry: they
// never let a lease end early.
[[nodiscard]] std::int64_t MaxFailoverExtensionMs(const ClockTiming& timing);

// The longest a lease of `ttl_ms` can outlive its TTL in real time, measured from the renewal
// that set its deadline: the failover bound, the leader's clock running slow by up to ρ over the
// TTL, and the expiry check interval plus a commit (T0) before the revoke is applied.
[[nodiscard]] std::int64_t MaxExtensionMs(const ClockTiming& timing, std::int64_t ttl_ms);

class ClusterClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // --- Leader side. ---

  // This node leads `term`; the term's first entry (the no-op) is at or below `first_index`. The
  // clock stops until MaybeStart() sees that index applied.
  void BecomeLeader(Term term, LogIndex first_index);
  void StepDown();
  [[nodiscard]] bool leading() const { return leading_; }
  [[nodiscard]] Term term() const { return term_; }
  // Starts the clock when `applied` reached the term's first index, continuing from
  // `applied_cluster_ms` (the state machine's clock). Returns whether it started on this call.
  bool MaybeStart(LogIndex applied, std::int64_t applied_cluster_ms, TimePoint now);
  [[nodiscard]] bool running() const { return running_; }
  // The leader's cluster time at `now`. Requires running().
  [[nodiscard]] std::int64_t Now(TimePoint now) const;
  // The stamp for a proposal made at `now`: Now(now), never below an earlier stamp; 0 when the
  // clock is not running (the state machine keeps its own clock for that entry).
  std::int64_t Stamp(TimePoint now);
  // Whether an idle leader should propose a ClockTick: running and nothing stamped for `interval`.
  [[nodiscard]] bool TickDue(TimePoint now, std::chrono::milliseconds interval) const;

  // --- Every node. ---

  // The state machine's applied cluster time as seen at `now` (called periodically).
  void ObserveApplied(std::int64_t applied_cluster_ms, TimePoint now);
  // The best local estimate of the cluster time at `now`: the leader's clock when running; else
  // the applied cluster time advanced by the local time since it last moved, by at most
  // `max_extrapolation` (when no leader advances it, the cluster clock stands still too).
  [[nodiscard]] std::int64_t Estimate(TimePoint now,
                                      std::chrono::milliseconds max_extrapolation) const;
  // When this node last started its clock as a new leader: how long the applied cluster time
  // stood still before that, beyond what it advanced (local monotonic time since it last moved,
  // minus the cluster time gained by the start). It misses the replication delay of the old
  // leader's last stamp and the observation period, so it slightly underestimates the extension.
  [[nodiscard]] std::optional<std::int64_t> last_start_stall_ms() const { return last_stall_ms_; }

 private:
  // Leader state. Invariant: running_ implies leading_.
  bool leading_ = false;
  bool running_ = false;
  Term term_;
  LogIndex first_index_;
  std::int64_t base_cluster_ms_ = 0;  // cluster time at base_time_
  TimePoint base_time_;
  std::int64_t last_stamp_ms_ = 0;  // Invariant: never decreases while running_
  TimePoint last_stamp_time_;

  // Applied clock as observed on this node: the value and when it last changed.
  bool observed_ = false;
  std::int64_t observed_ms_ = 0;
  TimePoint observed_changed_at_;
  std::optional<std::int64_t> last_stall_ms_;
};

}  // namespace epoch::server
