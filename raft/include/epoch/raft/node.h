// Node: one Raft participant as a pure, deterministic state machine (etcd raft's RawNode).
//
// Who calls it: the driver — server/'s Asio event loop in production, the simulator
// (tests/sim) and the unit tests otherwise. Inputs: Tick() (the passage of one tick of the
// driver's monotonic clock), Step() (a message from a peer), and the client calls Propose,
// ReadIndex, TransferLeadership, ProposeConfChange, Report*. Outputs leave only through Ready:
// the driver calls GetReady() when HasReady(), does what it says (persist, send, apply — see
// ready.h and raft/DESIGN.md) and then calls Advance(ready). Persisted state is read through the
// LogReader given at construction, which the driver updates as it persists Readies (MemoryLog in
// tests, the WAL in production).
//
// No I/O, clocks, threads or global state: the same seed, configuration, log and call sequence
// always give the same outputs. Randomness (election timeouts) comes from a PRNG seeded at
// construction.
//
// Threading: not thread-safe; every call on one thread (the driver's). Tick/Step/Propose/... may
// be called between GetReady() and Advance() (the server persists asynchronously); a second
// GetReady() only after Advance().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/raft/conf_change.h"
#include "epoch/raft/config.h"
#include "epoch/raft/log_reader.h"
#include "epoch/raft/message.h"
#include "epoch/raft/ready.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

enum class StepResult : std::uint8_t {
  kOk,         // processed (it may have produced messages or state changes)
  kStaleTerm,  // from an older term: dropped (possibly answered so the sender learns our term)
  kWithheld,   // (pre)vote request dropped because a live leader is known (vote withholding)
  kIgnored,    // not for us, from a removed/unknown peer, or meaningless in our role
};

enum class ProposeError : std::uint8_t {
  kNone,
  kNotLeader,           // see ProposeResult::leader_hint
  kTransferInProgress,  // a leadership transfer is under way: retry at the new leader
  kUncommittedLimit,    // too many uncommitted bytes (Config::max_uncommitted_bytes)
  kConfChangePending,   // the previous conf change is not applied yet, or no commit in term yet
  kLearnerNotCaughtUp,  // PromoteLearner of a learner whose match is below the commit index
  kInvalidConfChange,   // the change does not apply to the current configuration
  kEmptyBatch,          // Propose with no commands
};

[[nodiscard]] std::string_view ProposeErrorName(ProposeError error);

struct ProposeResult {
  ProposeError error = ProposeError::kNone;
  NodeId leader_hint;  // the known leader (kNoNode if none), set on kNotLeader
  Term term;           // term of the appended entries
  LogIndex first_index;
  LogIndex last_index;

  [[nodiscard]] bool ok() const { return error == ProposeError::kNone; }
};

enum class ReadIndexOutcome : std::uint8_t {
  kLease,      // leader with a valid lease: the ReadState is in the next Ready (via_lease)
  kPending,    // leader: waits for a heartbeat round (or for the first commit of its term)
  kForwarded,  // follower: asked the leader; the ReadState comes when it answers
  kConfirmed,  // single-voter leader: the ReadState is in the next Ready (no round needed)
  kNoLeader,   // no known leader: retry later
};

enum class TransferOutcome : std::uint8_t {
  kStarted,  // lease reads stopped; TimeoutNow sent now or once the target caught up
  kNotLeader,
  kTargetIsSelf,
  kTargetNotVoter,
  kAlreadyInProgress,  // to the same target (a different target replaces the old one)
};

enum class ProgressState : std::uint8_t {
  kProbe,      // one AppendEntries at a time until the match point is found
  kReplicate,  // optimistic pipelining within the in-flight window
  kSnapshot,   // waiting for an InstallSnapshot to complete (ReportSnapshot)
};

[[nodiscard]] std::string_view ProgressStateName(ProgressState state);

// The leader's view of one peer (the leader itself included: match = its durable index).
struct PeerStatus {
  NodeId id;
  bool learner = false;
  ProgressState state = ProgressState::kProbe;
  LogIndex match;
  LogIndex next;
  std::uint64_t inflight_msgs = 0;
  std::uint64_t inflight_bytes = 0;
  LogIndex pending_snapshot;  // index of the snapshot in flight (kSnapshot)
  bool recent_active = false;
  std::uint64_t acked_round = 0;
  std::int64_t reported_floor = 0;  // the election floor of its latest answer
};

struct NodeStatus {
  NodeId id;
  Role role = Role::kFollower;
  Term term;
  NodeId vote;
  NodeId leader;
  LogIndex commit;
  LogIndex applied;
  LogIndex first_index;
  LogIndex last_index;
  ConfState conf;
  std::int64_t now_ticks = 0;
  std::int64_t election_timeout_ticks = 0;       // current randomized timeout
  std::int64_t election_timeout_base_ticks = 0;  // adaptive base T
  bool lease_valid = false;
  std::int64_t lease_expiry_tick = 0;  // lease valid while now_ticks < this (leader only)
  Timing timing;                       // as of the last UpdateTiming (or construction)
  NodeId transfer_target;
  std::vector<PeerStatus> progress;  // leader only, sorted by id
};

class Raft;  // the protocol core (raft/src/raft.h)

class Node {
 public:
  // `config` must pass Validate(); `log` must outlive the Node and reflect what the driver has
  // persisted. The node restores term, vote and commit from log.InitialHardState(), its
  // membership from log.LastSnapshot(), and starts as a follower that withholds (pre)votes for
  // one election floor (it may have acknowledged a leader just before it restarted).
  Node(const Config& config, const LogReader& log, std::uint64_t seed);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  // One tick of the driver's monotonic clock.
  void Tick();
  // `ticks` ticks the driver's loop missed (it was paused or starved) and replays now. Their
  // timers and the leader lease run out as ticks always do, but the messages that arrived during
  // the pause are not stepped yet, so the silence they show is partly this node's own: elections
  // and the leader's check-quorum wait a heartbeat interval after the replay (at most one more
  // election timeout in all), for those messages and a fresh heartbeat round. Liveness only: the
  // lease and every safety decision count the replayed ticks in full.
  void CatchUp(std::int64_t ticks);
  // A message from a peer. Never throws; malformed or irrelevant messages are ignored.
  StepResult Step(const Message& message);

  // Leader only: appends one entry per command, in order, to be replicated.
  ProposeResult Propose(std::vector<std::string> commands);
  // Leader only: one membership change at a time (see conf_change.h).
  ProposeResult ProposeConfChange(const ConfChange& change);
  // A linearizable read identified by `context` (unique per pending request): the answer comes as
  // a ReadState in a later Ready (or in the next one for kLease). Leader: lease when valid and a
  // current-term entry is committed, else ReadIndex — requests made between two GetReady calls
  // share one heartbeat round. Follower: forwarded to the leader.
  ReadIndexOutcome ReadIndex(std::uint64_t context);
  TransferOutcome TransferLeadership(NodeId target);
  // Start an election now (pre-vote first when enabled), as if the election timer fired.
  void Campaign();
  // Adopts new timing (heartbeat, election floor, jitter, cap, drift bound) at once; the driver
  // calls it when it applies a cluster timing change, on every member, in any order. Safe while
  // members run different floors: the lease takes the smallest floor its quorum reported, and a
  // lowered floor keeps its old value for the leader contact already answered (and for the
  // driver's next start, see Config::boot_withhold_ticks). InvalidArgument, with nothing
  // changed, when the config with these values fails Config::Validate().
  epoch::Status UpdateTiming(const Timing& timing);
  // The driver finished (ok) or gave up (!ok) streaming the snapshot to `peer`.
  void ReportSnapshot(NodeId peer, bool ok);
  // The transport could not deliver to `peer`: stop pipelining to it and probe.
  void ReportUnreachable(NodeId peer);

  [[nodiscard]] bool HasReady() const;
  // Only when no Ready is outstanding (every earlier Ready was Advanced).
  [[nodiscard]] Ready GetReady();
  // Everything in `ready` is durable and handled (messages sent, entries applied).
  void Advance(const Ready& ready);

  // Introspection (tests, simulator, metrics).
  [[nodiscard]] NodeId id() const;
  [[nodiscard]] Role role() const;
  [[nodiscard]] Term term() const;
  [[nodiscard]] NodeId leader() const;
  [[nodiscard]] LogIndex commit_index() const;
  [[nodiscard]] LogIndex applied_index() const;
  [[nodiscard]] LogIndex last_index() const;
  [[nodiscard]] const ConfState& conf_state() const;  // as of applied_index()
  [[nodiscard]] bool IsLearner() const;
  // Leader lease currently usable for reads (leader, current-term entry committed, no transfer
  // started this term, now < expiry).
  [[nodiscard]] bool LeaseValid() const;
  [[nodiscard]] std::int64_t lease_expiry_tick() const;
  [[nodiscard]] std::int64_t now_ticks() const;
  [[nodiscard]] std::int64_t election_timeout_ticks() const;
  [[nodiscard]] std::int64_t election_timeout_base_ticks() const;
  [[nodiscard]] NodeStatus Status() const;

 private:
  std::unique_ptr<Raft> raft_;
};

}  // namespace epoch::raft
