// RaftDriver: runs one raft::Node on an Asio strand and does what each Ready says.
//
// Order of work for each Ready (raft/DESIGN.md "Driving the core"), on the driver's strand:
//   1. soft state: publish role/leader/term; on a leader change, fail pending reads (retryable);
//   2. `messages`: send at once — the leader replicates while its own write is in flight;
//      a kInstallSnapshot goes to the SnapshotHooks, which stream the image out of band;
//   3. a snapshot: the hooks install the received image into the state machine (durably) first;
//      then persist snapshot meta, entries, hard state through DurableLog (asynchronous; the
//      strand keeps ticking and stepping messages meanwhile; a second Ready waits for this one);
//   4. once durable: send `messages_after_persist` (votes, append responses);
//   5. apply `committed_entries` to the StateMachine and answer the proposals waiting on them;
//   6. serve `read_states` whose index is applied (others wait for the apply that reaches them);
//   7. connect or drop peers on a new `conf_state`; 8. Advance; 9. the hooks may compact the log.
// A persist error is fail-stop: the node logs it and exits (never retries an fsync).
//
// Who calls it: the gRPC services (Propose, ReadIndex, TransferLeadership — from any thread),
// the peer transport (Receive, Unreachable — from its threads). Callbacks run on the driver's
// strand: they must not block.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "epoch/metrics_text.h"
#include "epoch/raft/node.h"
#include "epoch/replication/durable_log.h"
#include "epoch/replication/state_machine.h"

namespace epoch::server {

// Where outgoing Raft messages go (the peer transport plus the codec, or a test network).
class MessageSender {
 public:
  virtual ~MessageSender() = default;
  virtual void Send(const raft::Message& message) = 0;
  // The applied membership changed: connect to new members, drop removed ones.
  virtual void OnMembership(const raft::ConfState& conf) = 0;
};

// Snapshots (server/SNAPSHOT.md; implemented by SnapshotManager). All calls on the strand.
class SnapshotHooks {
 public:
  virtual ~SnapshotHooks() = default;
  // A kInstallSnapshot from the core (step 2): stream the state-machine image to message.to out
  // of band, then call RaftDriver::ReportSnapshot(message.to, ok) exactly once.
  virtual void SendSnapshot(const raft::Message& message) = 0;
  // Ready::snapshot (step 3): swap the received image into the state machine, durably, before
  // the meta is persisted. A non-OK status is fatal.
  virtual Status InstallSnapshot(const raft::SnapshotMeta& meta) = 0;
  // After each Advance: log compaction (DurableLog::Compact) when the log grew enough.
  virtual void AfterAdvance(const raft::Ready& ready, const raft::Node& node) = 0;
};

// What the layers above plug into the driver, handed over once at Start(); every hook runs on
// the strand. Absent hooks are skipped.
struct DriverHooks {
  // Snapshots. Without them, kInstallSnapshot is sent as a plain message and a received snapshot
  // is fatal (driver tests).
  SnapshotHooks* snapshots = nullptr;
  // Sees every proposal just before it is serialized into the log (the lease manager stamps the
  // leader's cluster clock, docs/timing-and-safety.md, and picks lease IDs).
  std::function<void(v1::InternalRequest&)> stamp;
  // A membership change (InternalRequest.member_change) reaching the leader: its checks and the
  // Raft configuration change that carries it (PlanMemberChange). Absent: such requests fail
  // with FailedPrecondition.
  std::function<Result<raft::ConfChange>(const v1::InternalRequest&, const raft::NodeStatus&)>
      member_change;
  // Runs after every tick.
  std::function<void()> on_tick;
};

struct RaftDriverOptions {
  raft::Config raft;
  std::chrono::milliseconds tick{10};
  std::uint64_t seed = 0;
  // Called instead of std::abort() when the log fails (tests observe it).
  std::function<void(const Status&)> on_fatal;
  // The monotonic clock ticks are derived from; tests substitute one that can jump (a pause).
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Where the tick timer waits. Absent: an Asio timer on the steady clock (epochd). The
  // whole-node simulator (tests/nodesim) sets it with `clock`: it calls `fire` once, `delay` later
  // on that clock, from the thread that polls the driver's io_context, and never after the driver
  // is destroyed.
  std::function<void(std::chrono::steady_clock::duration delay, std::function<void()> fire)>
      schedule_tick;
  // Planted bugs for the whole-node simulator's mutation tests (tests/nodesim); off in epochd.
  struct Mutations {
    // A proposal whose log index another leader's entry took is answered with that entry's
    // outcome instead of "leader changed".
    bool answer_replaced_entry = false;
    // A linearizable read is served once its read index is known, before the state machine has
    // applied up to it.
    bool read_before_apply = false;
  } mutations;
};

// A consistent copy of the node's state for status endpoints and leader routing.
struct DriverStatus {
  NodeId id;
  NodeId leader;
  Term term;
  raft::Role role = raft::Role::kFollower;
  LogIndex commit;
  LogIndex applied;
  LogIndex last_index;
  bool lease_valid = false;
  std::int64_t election_timeout_base_ticks = 0;  // the core's adaptive base T
  std::uint64_t leader_changes = 0;
  std::uint64_t lease_reads = 0;
  std::uint64_t read_index_reads = 0;
  std::uint64_t read_index_requests = 0;  // ReadIndex rounds: reads that queue together share one
  std::uint64_t proposals_committed = 0;
  std::uint64_t proposals_failed = 0;
  std::uint64_t proposals_pending = 0;  // proposed by this member, not yet committed or failed
  std::uint64_t slow_applies = 0;       // applies of committed entries over kSlowApply
  raft::Timing timing;                  // what the core runs (UpdateTiming)
  // Leader only: each voter's election floor (ticks) in its latest answer this term, by id;
  // 0 when it has not answered yet. The leader's own entry is its own floor.
  std::vector<std::pair<NodeId, std::int64_t>> voter_floors;
};

class RaftDriver {
 public:
  // An apply of committed entries that takes longer is counted as slow (etcd's
  // warnApplyDuration, etcd_server_slow_apply_total).
  static constexpr std::chrono::milliseconds kSlowApply{100};
  // A tick that runs this much after it was due is logged: the strand was blocked by a long
  // handler or its thread got no CPU, and peers heard nothing from this member meanwhile (the
  // election timeout floor is 150 ms by default).
  static constexpr std::chrono::milliseconds kLateTick{100};
  using ProposeCallback = std::function<void(const Status&, const v1::InternalResponse&)>;
  // OK: the state machine has applied everything a linearizable read must see; serve it now.
  using ReadCallback = std::function<void(const Status&)>;
  using DoneCallback = std::function<void(const Status&)>;

  RaftDriver(asio::io_context& io, RaftDriverOptions options, DurableLog& log,
             StateMachine& state_machine, MessageSender& sender);
  ~RaftDriver();
  RaftDriver(const RaftDriver&) = delete;
  RaftDriver& operator=(const RaftDriver&) = delete;

  // Starts ticking with `hooks` in place: nothing reaches a hook before this. Messages, proposals
  // and reads that arrive earlier (the peer transport and the client ports open first) step the
  // core or wait; no Ready is handled and no proposal is stamped until Start's turn on the strand.
  void Start(DriverHooks hooks = {});
  // Stops ticking and fails every waiting proposal and read with Unavailable.
  void Stop();

  // Thread-safe. The request gets its request_id (and later its cluster time) here. Fails fast
  // with NotLeader (carrying no retry inside) when this node is not the leader.
  void Propose(v1::InternalRequest request, ProposeCallback done);
  void ReadIndex(ReadCallback done);
  void TransferLeadership(NodeId target, DoneCallback done);
  // Adopts new timing in the core (raft::Node::UpdateTiming) on the strand; `done` gets the
  // outcome (InvalidArgument, nothing changed, when the core refuses it).
  void UpdateTiming(raft::Timing timing, DoneCallback done);
  void Receive(raft::Message message);
  void Unreachable(NodeId peer);
  // Runs `fn` on the driver's strand (e.g. a read of the state machine between applies).
  void Post(std::function<void()> fn);
  // Thread-safe: the snapshot transfer to `peer` finished (ok) or failed.
  void ReportSnapshot(NodeId peer, bool ok);

  [[nodiscard]] DriverStatus status() const;
  // The driver's part of /metrics: term, role, indexes, the adaptive timeout, proposals, reads,
  // the tick delay and apply latency histograms.
  void RenderMetrics(MetricsText& m) const;
  [[nodiscard]] NodeId id() const { return options_.raft.id; }

  // Thread-safe and without the strand: true when a linearizable read may be served from the state
  // machine right now, by the leader's lease (docs/timing-and-safety.md §5.4). The strand publishes
  // the lease's end on the clock its ticks come from, and the commit index, before any message or
  // acknowledgement can show either to anyone; the lease ends for the fast path where it ends for
  // the core (lost leadership, a transfer started, expiry). True also needs the state machine to
  // have applied that commit index; otherwise the caller takes ReadIndex() (which waits). A true
  // answer counts as a lease read.
  [[nodiscard]] bool TryLeaseRead();

 private:
  struct PendingProposal {
    Term term;
    ProposeCallback done;
  };
  struct WaitingRead {
    LogIndex index;
    ReadCallback done;
  };

  void ScheduleTick();
  void OnTick();
  void CatchUpTicks();
  [[nodiscard]] std::chrono::steady_clock::time_point Now() const;
  void FlushProposals();
  void ProposeMemberChange(v1::InternalRequest request, ProposeCallback done);
  [[nodiscard]] static Status ProposeFailure(const raft::ProposeResult& result);
  void FlushReads();
  void ScheduleReadFlush();
  void MaybeHandleReady();
  void AfterPersist(const std::shared_ptr<raft::Ready>& ready, const Status& status);
  void ApplyCommitted(std::span<const raft::Entry> entries);
  void ServeReadStates(const std::vector<raft::ReadState>& states);
  void ServeWaitingReads();
  void OnSoftState(const raft::SoftState& soft);
  void FailAllReads(const Status& status);
  void FailAllProposals(const Status& status);
  void PublishStatus();
  void PublishCounters();
  void PublishLease();
  void Fatal(const Status& status);

  asio::io_context& io_;
  asio::strand<asio::io_context::executor_type> strand_;
  asio::steady_timer tick_timer_;
  const RaftDriverOptions options_;
  DurableLog& log_;
  StateMachine& state_machine_;
  MessageSender& sender_;
  std::unique_ptr<raft::Node> node_;

  // --- Strand-only state. ---
  DriverHooks hooks_;     // set in Start()'s turn on the strand, together with started_
  bool started_ = false;  // Invariant: false => no Ready handled, no proposal flushed.
  bool stopped_ = false;
  bool ready_in_flight_ = false;  // Invariant: at most one Ready between GetReady and Advance.
  std::chrono::steady_clock::time_point next_tick_;
  // Ticks are counted from tick_epoch_: the core has been ticked ticks_done_ times (or told so,
  // after a capped catch-up), and tick number k is due at tick_epoch_ + k * tick.
  std::chrono::steady_clock::time_point tick_epoch_;
  std::int64_t ticks_done_ = 0;
  std::vector<std::pair<v1::InternalRequest, ProposeCallback>> proposal_batch_;
  bool flush_scheduled_ = false;
  std::map<LogIndex, PendingProposal> pending_proposals_;  // by log index
  std::uint64_t next_read_context_ = 1;
  // Reads that arrived since the last ReadIndex request was made; they share the next one.
  std::vector<ReadCallback> read_batch_;
  bool read_flush_scheduled_ = false;
  std::map<std::uint64_t, std::vector<ReadCallback>> pending_reads_;  // by ReadIndex context
  std::deque<WaitingRead> reads_waiting_apply_;                       // ascending index
  NodeId last_leader_;
  struct Counters {
    std::uint64_t leader_changes = 0;
    std::uint64_t lease_reads = 0;
    std::uint64_t read_index_reads = 0;
    std::uint64_t read_index_requests = 0;
    std::uint64_t proposals_committed = 0;
    std::uint64_t proposals_failed = 0;
    std::uint64_t slow_applies = 0;
  } counters_;  // copied into status_ by PublishStatus()
  // How late each tick ran after it was due, and how long each apply of committed entries took
  // (any thread may render them): a stall of the strand shows in the first whatever its cause.
  LatencyHistogram tick_delay_;
  LatencyHistogram apply_latency_;

  // --- The lease, published by the strand for TryLeaseRead() on any thread. ---
  // Steady-clock nanoseconds before which the lease holds (0: no lease). Stored after
  // lease_commit_, so a reader that sees a deadline sees a commit index at least as new.
  std::atomic<std::int64_t> lease_until_ns_{0};
  std::atomic<std::uint64_t> lease_commit_{0};
  std::atomic<std::uint64_t> fast_lease_reads_{0};

  std::atomic<std::uint64_t> next_request_id_;
  mutable std::mutex status_mu_;
  DriverStatus status_;  // guarded by status_mu_
};

}  // namespace epoch::server
