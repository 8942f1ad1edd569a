// Config: the static parameters of one Raft core (raft::Node), and the timing rules that tie
// them together (docs/timing-and-safety.md §2). The server builds one from its flags and must call
// Validate() at startup and refuse to start on error; the simulator and the tests build them
// directly. Node's constructor asserts Validate().ok().
//
// Time is counted in ticks: the driver calls Node::Tick() at a fixed period of its monotonic clock
// (suggested 10 ms). All *_ticks fields are in those ticks.
//
// Threading: a plain value; copy freely.
#pragma once

#include <cstdint>

#include "epoch/raft/types.h"
#include "epoch/status.h"

namespace epoch::raft {

class Logger;

// The timing parameters a running node can change (Node::UpdateTiming). The server keeps them as
// cluster settings in its replicated state and hands every member the same values; the tick
// period itself is the driver's and never changes while a node runs.
struct Timing {
  std::int64_t heartbeat_ticks = 5;
  std::int64_t election_timeout_min_ticks = 15;
  std::int64_t election_jitter_ticks = 15;
  std::int64_t max_election_timeout_ticks = 60;
  double max_clock_drift = 0.05;
  friend bool operator==(const Timing&, const Timing&) = default;
};

struct Config {
  // Deliberate bugs for the simulator's self-test (the checkers must be able to fail).
  // All false in production; Validate() does not look at them. Each one breaks exactly one
  // safety rule, named in its comment, and is exercised by a unit test showing that it changes
  // behaviour.
  struct Mutations {
    // Grant votes without the "candidate's log is at least as up-to-date" check (Raft §5.4.1).
    bool no_election_restriction = false;
    // Commit an entry of an earlier term once a majority stores it (violates Raft §5.4.2 / Fig. 8).
    bool commit_prior_term_by_counting = false;
    // Lease = the full election floor: no division by (1 + ρ) and no ε (raft/DESIGN.md §4).
    bool lease_without_drift_margin = false;
    // Grant votes and pre-votes even while a live leader was heard within the floor.
    bool vote_while_leader_live = false;
    // Put vote and append responses in Ready::messages (sent before the hard state and entries
    // of that Ready are durable) instead of Ready::messages_after_persist.
    bool reply_before_persist = false;
    // Answer ReadIndex with the commit index at once, without a heartbeat round (Raft §6.4).
    bool read_index_without_quorum = false;
    // Report every committed entry as durable (Ready::durable_committed), so the driver applies
    // entries of the Ready it is still writing.
    bool apply_before_durable = false;
    // Derive the lease from the leader's own election floor only, ignoring the floors its
    // followers report (unsafe while the floor changes at run time).
    bool lease_from_own_floor = false;
    // Lower the election floor at once in UpdateTiming, ending the withholding the last leader
    // contact was answered with (the leader's lease may still count on it).
    bool lower_floor_without_hold = false;

    [[nodiscard]] bool Any() const {
      return no_election_restriction || commit_prior_term_by_counting ||
             lease_without_drift_margin || vote_while_leader_live || reply_before_persist ||
             read_index_without_quorum || apply_before_durable || lease_from_own_floor ||
             lower_floor_without_hold;
    }
  };

  // This node's identity; never kNoNode.
  NodeId id;

  // --- Timing (ticks). Rules checked by Validate(); see raft/DESIGN.md "Timing rules". ---
  // The leader broadcasts a heartbeat round every heartbeat_ticks.
  std::int64_t heartbeat_ticks = 5;
  // The cluster floor T0: no node ever uses an election timeout below it, and followers that
  // heard from a live leader within it withhold (pre)votes. Every answer to the leader carries
  // it, and the leader derives its lease from the smallest floor of the quorum that acknowledged
  // a round (raft/DESIGN.md §4), so members may run different floors while a change rolls out.
  std::int64_t election_timeout_min_ticks = 15;
  // Each election timeout is drawn uniformly from [T, T + election_jitter_ticks), where T is the
  // adaptive base (floor <= T <= max_election_timeout_ticks).
  std::int64_t election_jitter_ticks = 15;
  // Cap for the adaptive base T (backoff after split votes, high RTT or slow persistence).
  std::int64_t max_election_timeout_ticks = 60;
  // Two pre-candidates that start within this many ticks of each other, with equally up-to-date
  // logs, are a tie: the lower node id goes first (the other refuses it its pre-vote), and a node
  // that granted a pre-vote waits this long before campaigning itself. Without it, both win
  // their pre-votes, split the real vote and wait out another timeout (raft/DESIGN.md
  // "Split votes"). 0 = off. Must be below the floor.
  std::int64_t election_tie_window_ticks = 2;
  // ρ: bound on the relative rate difference between any two nodes' tick clocks (0.05 = 5 %).
  double max_clock_drift = 0.05;
  // ε: safety margin subtracted from the lease, in ticks; at least 1 (covers tick quantization:
  // a follower's "elapsed" count can be up to one tick ahead of real time).
  std::int64_t lease_margin_ticks = 2;
  // Leader lease length. 0 = derive the longest safe value, floor(T0 / (1 + ρ)) - ε. A non-zero
  // value is used as is and must not exceed that bound.
  std::int64_t lease_ticks = 0;
  // A leader steps down when it has entries its own disk has not made durable and its durable
  // index has not advanced for this many ticks (WAL fsync stalled).
  std::int64_t durability_stall_ticks = 50;
  // A leadership transfer whose target has not taken over after this many ticks is abandoned
  // (proposals are accepted again). 0 = the election floor.
  std::int64_t transfer_timeout_ticks = 0;
  // After construction the node neither grants (pre)votes nor campaigns for this many ticks, when
  // that is longer than the floor (which always applies: boot counts as leader contact). A driver
  // that lowered the floor shortly before a restart sets it to the floor in force before, which
  // the node may still have answered a leader with. 0 = the floor alone.
  std::int64_t boot_withhold_ticks = 0;

  // --- Flow control. ---
  // In-flight AppendEntries per follower in the replicate state: by count and by entry bytes.
  std::uint64_t max_inflight_msgs = 256;
  std::uint64_t max_inflight_bytes = 8U << 20;
  // Entry bytes per AppendEntries message (a single larger entry is still sent alone).
  std::uint64_t max_msg_bytes = 1U << 20;
  // Proposals are refused while the leader holds more than this many uncommitted entry bytes.
  std::uint64_t max_uncommitted_bytes = 64U << 20;
  // Committed entry bytes handed out per Ready (at least one entry).
  std::uint64_t max_committed_bytes_per_ready = 64U << 20;

  // --- Protocol options (both on by default; docs/timing-and-safety.md §3.1). ---
  bool pre_vote = true;
  bool check_quorum = true;

  Mutations mutations;

  // Optional diagnostic sink, not owned; must outlive the Node. Null = silent.
  Logger* logger = nullptr;

  // OK, or InvalidArgument naming the first violated rule with the offending values, e.g.
  // "heartbeat_ticks (8) must be at most election_timeout_min_ticks / 3 (5): a follower must see
  // at least three heartbeats per election floor".
  [[nodiscard]] Status Validate() const;

  // Lease length the leader uses (ticks) when every voter runs this config's floor: lease_ticks
  // if set, else the derived bound; with the lease_without_drift_margin mutation, the full floor.
  [[nodiscard]] std::int64_t EffectiveLeaseTicks() const;
  // The same for a quorum whose smallest floor is `floor`: the derived bound
  // floor(floor / (1 + ρ)) - ε, capped by lease_ticks when set.
  [[nodiscard]] std::int64_t LeaseTicksFor(std::int64_t floor) const;
  [[nodiscard]] Timing timing() const;
  void SetTiming(const Timing& timing);
  // floor(T0 / (1 + ρ)) - ε: the longest lease Validate() accepts.
  [[nodiscard]] std::int64_t MaxSafeLeaseTicks() const;
  [[nodiscard]] std::int64_t EffectiveTransferTimeoutTicks() const;
};

}  // namespace epoch::raft
