#include "epoch/replication/raft_driver.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <span>
#include <utility>

#include "epoch/etcd_errors.h"
#include "epoch/raft/logger.h"

namespace epoch::server {
namespace {

// Retryable: the request may be sent again (to the new leader). etcd's "leader changed".
Status LeaderChanged() { return etcd_errors::kLeaderChanged.ToStatus(); }
Status NoLeader() { return etcd_errors::kNoLeader.ToStatus(); }
Status Stopping() { return etcd_errors::kStopped.ToStatus(); }

}  // namespace

namespace {

// The core's diagnostics (elections, adaptive timeout changes, step-downs) into the node's log.
class SpdlogRaftLogger final : public raft::Logger {
 public:
  void Log(raft::LogLevel level, NodeId node, Term term, std::string_view message) override {
    spdlog::level::level_enum l = spdlog::level::info;
    switch (level) {
      case raft::LogLevel::kDebug: l = spdlog::level::debug; break;
      case raft::LogLevel::kInfo: l = spdlog::level::info; break;
      case raft::LogLevel::kWarning: l = spdlog::level::warn; break;
      case raft::LogLevel::kError: l = spdlog::level::err; break;
    }
    spdlog::log(l, "raft node={:x} term={} {}", node.value(), term.value(), message);
  }
};

SpdlogRaftLogger raft_logger;  // stateless; spdlog is thread-safe

raft::Config WithLogger(raft::Config config) {
  if (config.logger == nullptr) config.logger = &raft_logger;
  return config;
}

}  // namespace

RaftDriver::RaftDriver(asio::io_context& io, RaftDriverOptions options, DurableLog& log,
                       StateMachine& state_machine, MessageSender& sender)
    : io_(io),
      strand_(asio::make_strand(io)),
      tick_timer_(strand_),
      options_(std::move(options)),
      log_(log),
      state_machine_(state_machine),
      sender_(sender),
      node_(std::make_unique<raft::Node>(WithLogger(options_.raft), log_, options_.seed)),
      next_request_id_((options_.raft.id.value() << 48) + 1) {
  status_.id = options_.raft.id;
}

RaftDriver::~RaftDriver() = default;

// The hooks are set on the strand: the transport delivers messages before Start (the driver's
// Readys and proposals read hooks_ there), so an assignment from the caller's thread would race
// with them, and a Ready handled earlier would miss the snapshot hooks.
void RaftDriver::Start(DriverHooks hooks) {
  asio::post(strand_, [this, hooks = std::move(hooks)]() mutable {
    hooks_ = std::move(hooks);
    started_ = true;
    tick_epoch_ = Now();
    next_tick_ = tick_epoch_ + options_.tick;
    PublishStatus();
    ScheduleTick();
    FlushProposals();  // proposals that arrived before Start, now stamped
    MaybeHandleReady();
  });
}

void RaftDriver::Stop() {
  asio::post(strand_, [this] {
    if (stopped_) return;
    stopped_ = true;
    lease_until_ns_.store(0);
    tick_timer_.cancel();
    FailAllReads(Stopping());
    FailAllProposals(Stopping());
  });
}

void RaftDriver::ScheduleTick() {
  // Relative wait: Now() may be a test clock that is not the timer's own.
  const auto delay = std::max(next_tick_ - Now(), std::chrono::steady_clock::duration(0));
  if (options_.schedule_tick) {
    options_.schedule_tick(delay, [this] {
      asio::post(strand_, [this] {
        if (!stopped_) OnTick();
      });
    });
    return;
  }
  tick_timer_.expires_after(delay);
  tick_timer_.async_wait([this](std::error_code ec) {
    if (ec || stopped_) return;
    OnTick();
  });
}

void RaftDriver::OnTick() {
  const auto late = std::max(Now() - next_tick_, std::chrono::steady_clock::duration(0));
  tick_delay_.Observe(late);
  if (late > kLateTick) {
    SPDLOG_WARN("raft loop stalled: tick ran {} ms late node={:x} term={} applied={}",
                std::chrono::duration_cast<std::chrono::milliseconds>(late).count(),
                options_.raft.id, node_->term(), state_machine_.AppliedIndex());
  }
  CatchUpTicks();
  MaybeHandleReady();
  PublishStatus();
  if (hooks_.on_tick) hooks_.on_tick();
  next_tick_ += options_.tick;
  auto now = Now();
  if (next_tick_ < now) next_tick_ = now + options_.tick;
  ScheduleTick();
}

// The core's tick count must never fall behind the monotonic clock by more than a tick: the
// leader lease is measured in ticks, so a leader whose loop was paused (SIGSTOP, a stall, a late
// timer) would otherwise believe in a lease that expired in real time (raft/DESIGN.md §4). Missed
// ticks are therefore replayed before the timer's own tick and before every lease decision, as a
// catch-up (Node::CatchUp): the peers' messages that arrived during the pause are still queued,
// so the core holds elections and check-quorum until they and a fresh heartbeat round are in.
// Replaying is capped: after max election timeout + jitter + 1 ticks every timer and the lease
// have run out, and further ticks change nothing but would flood the peers with heartbeats.
namespace {
constexpr std::int64_t kLateTimerTicks = 2;
}  // namespace

void RaftDriver::CatchUpTicks() {
  auto due = static_cast<std::int64_t>((Now() - tick_epoch_) / options_.tick);
  std::int64_t missing = due - ticks_done_;
  if (missing <= 0) return;
  const std::int64_t cap =
      options_.raft.max_election_timeout_ticks + options_.raft.election_jitter_ticks + 1;
  // One tick is the timer's own, two a timer a little late; more means this loop was paused:
  // replay them as a catch-up.
  if (missing <= kLateTimerTicks) {
    for (std::int64_t i = 0; i < missing; ++i) node_->Tick();
  } else {
    node_->CatchUp(std::min(missing, cap));
  }
  ticks_done_ = due;
}

std::chrono::steady_clock::time_point RaftDriver::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void RaftDriver::Propose(v1::InternalRequest request, ProposeCallback done) {
  request.set_request_id(next_request_id_.fetch_add(1));
  asio::post(strand_, [this, request = std::move(request), done = std::move(done)]() mutable {
    if (stopped_) return done(Stopping(), {});
    proposal_batch_.emplace_back(std::move(request), std::move(done));
    if (!flush_scheduled_) {
      flush_scheduled_ = true;
      // Proposals that arrive while this handler is queued join the same batch.
      asio::post(strand_, [this] { FlushProposals(); });
    }
  });
}

void RaftDriver::FlushProposals() {
  flush_scheduled_ = false;
  if (!started_ || proposal_batch_.empty()) return;  // Start's turn flushes what waits
  auto all = std::move(proposal_batch_);
  proposal_batch_.clear();
  decltype(all) batch;
  batch.reserve(all.size());
  for (auto& [request, done] : all) {
    if (request.has_member_change()) {
      ProposeMemberChange(std::move(request), std::move(done));
    } else {
      batch.emplace_back(std::move(request), std::move(done));
    }
  }
  if (batch.empty()) return;
  std::vector<std::string> commands;
  commands.reserve(batch.size());
  for (auto& [request, done] : batch) {
    if (hooks_.stamp) hooks_.stamp(request);
    commands.push_back(request.SerializeAsString());
  }
  raft::ProposeResult result = node_->Propose(std::move(commands));
  if (!result.ok()) {
    Status status = ProposeFailure(result);
    for (auto& [request, done] : batch) done(status, {});
    counters_.proposals_failed += batch.size();
    return;
  }
  LogIndex index = result.first_index;
  for (auto& [request, done] : batch) {
    pending_proposals_.emplace(index, PendingProposal{result.term, std::move(done)});
    ++index;
  }
  MaybeHandleReady();
}

Status RaftDriver::ProposeFailure(const raft::ProposeResult& result) {
  switch (result.error) {
    case raft::ProposeError::kNotLeader:
      return result.leader_hint == raft::kNoNode ? NoLeader() : etcd_errors::kNotLeader.ToStatus();
    case raft::ProposeError::kLearnerNotCaughtUp: return etcd_errors::kLearnerNotReady.ToStatus();
    default: return etcd_errors::kProposalDropped.ToStatus(raft::ProposeErrorName(result.error));
  }
}

// A membership change is one kConfChange entry whose context is the request itself, so the
// Raft configuration and the member table change in the same entry (member_change_plan.h).
void RaftDriver::ProposeMemberChange(v1::InternalRequest request, ProposeCallback done) {
  if (!hooks_.member_change) {
    return done(Status::FailedPrecondition("epoch: membership changes are not served here"), {});
  }
  if (hooks_.stamp) hooks_.stamp(request);
  Result<raft::ConfChange> change = hooks_.member_change(request, node_->Status());
  if (!change.ok()) {
    ++counters_.proposals_failed;
    return done(change.status(), {});
  }
  change->context = request.SerializeAsString();
  raft::ProposeResult result = node_->ProposeConfChange(*change);
  if (!result.ok()) {
    ++counters_.proposals_failed;
    return done(ProposeFailure(result), {});
  }
  pending_proposals_.emplace(result.first_index, PendingProposal{result.term, std::move(done)});
  MaybeHandleReady();
}

void RaftDriver::ReadIndex(ReadCallback done) {
  asio::post(strand_, [this, done = std::move(done)]() mutable {
    if (stopped_) return done(Stopping());
    // Lease path without waiting for a Ready round trip (which may sit behind an fsync): while
    // the lease is valid, the commit index is a safe read index (raft/DESIGN.md §4). The tick
    // count is brought up to date first, so a pause of this process cannot stretch the lease.
    CatchUpTicks();
    if (node_->LeaseValid()) {
      ++counters_.lease_reads;
      PublishCounters();
      reads_waiting_apply_.push_back({node_->commit_index(), std::move(done)});
      ServeWaitingReads();
      return;
    }
    // Reads that arrive while a request is queued share it (as etcd's read loop does): it is
    // made after each of them arrived, so its index covers every write they must see. Under load
    // this is one ReadIndex round trip per strand turn instead of one per read.
    read_batch_.push_back(std::move(done));
    ScheduleReadFlush();
  });
}

void RaftDriver::ScheduleReadFlush() {
  if (read_flush_scheduled_ || read_batch_.empty()) return;
  read_flush_scheduled_ = true;
  asio::post(strand_, [this] { FlushReads(); });
}

void RaftDriver::FlushReads() {
  read_flush_scheduled_ = false;
  std::vector<ReadCallback> batch = std::move(read_batch_);
  read_batch_.clear();
  if (batch.empty()) return;
  if (stopped_) {
    for (ReadCallback& done : batch) done(Stopping());
    return;
  }
  std::uint64_t context = next_read_context_++;
  raft::ReadIndexOutcome outcome = node_->ReadIndex(context);
  if (outcome == raft::ReadIndexOutcome::kNoLeader) {
    for (ReadCallback& done : batch) done(NoLeader());
    return;
  }
  counters_.read_index_reads += batch.size();
  ++counters_.read_index_requests;
  PublishCounters();
  pending_reads_.emplace(context, std::move(batch));
  MaybeHandleReady();
}

void RaftDriver::TransferLeadership(NodeId target, DoneCallback done) {
  asio::post(strand_, [this, target, done = std::move(done)] {
    switch (node_->TransferLeadership(target)) {
      case raft::TransferOutcome::kStarted:
      case raft::TransferOutcome::kAlreadyInProgress: MaybeHandleReady(); return done(Status::Ok());
      case raft::TransferOutcome::kNotLeader: return done(etcd_errors::kNotLeader.ToStatus());
      case raft::TransferOutcome::kTargetIsSelf: return done(Status::Ok());
      case raft::TransferOutcome::kTargetNotVoter:
        return done(etcd_errors::kBadLeaderTransferee.ToStatus());
    }
  });
}

void RaftDriver::Receive(raft::Message message) {
  asio::post(strand_, [this, message = std::move(message)] {
    if (stopped_) return;
    (void)node_->Step(message);
    MaybeHandleReady();
  });
}

void RaftDriver::Unreachable(NodeId peer) {
  asio::post(strand_, [this, peer] {
    if (!stopped_) node_->ReportUnreachable(peer);
  });
}

void RaftDriver::UpdateTiming(raft::Timing timing, DoneCallback done) {
  asio::post(strand_, [this, timing, done = std::move(done)] {
    if (stopped_) return done(Status::Unavailable("stopped"));
    Status s = node_->UpdateTiming(timing);
    PublishStatus();
    MaybeHandleReady();
    done(s);
  });
}

void RaftDriver::Post(std::function<void()> fn) { asio::post(strand_, std::move(fn)); }

void RaftDriver::ReportSnapshot(NodeId peer, bool ok) {
  asio::post(strand_, [this, peer, ok] {
    if (stopped_) return;
    node_->ReportSnapshot(peer, ok);
    MaybeHandleReady();
  });
}

void RaftDriver::MaybeHandleReady() {
  // Every strand turn that steps, ticks, proposes or finishes a Ready ends here: the lease and the
  // commit index are published before this Ready's messages (a TimeoutNow, a commit index in an
  // append or a ReadIndex answer) leave, and before AfterPersist acknowledges writes.
  PublishLease();
  if (!started_ || stopped_ || ready_in_flight_ || !node_->HasReady()) return;
  auto ready = std::make_shared<raft::Ready>(node_->GetReady());
  ready_in_flight_ = true;
  if (ready->soft_state) OnSoftState(*ready->soft_state);
  for (const raft::Message& m : ready->messages) {
    // The snapshot data travels out of band; the hooks report the transfer (ReportSnapshot).
    if (m.type == raft::MessageType::kInstallSnapshot && hooks_.snapshots) {
      hooks_.snapshots->SendSnapshot(m);
    } else {
      sender_.Send(m);
    }
  }
  const bool persist = ready->snapshot || !ready->entries.empty() || ready->hard_state;
  if (persist) {
    if (ready->snapshot) {
      // The state machine takes the received image before the meta is persisted: after a crash
      // in between, the old log replays onto a state that is ahead of it (entries at or below
      // the applied index are skipped), never behind. Without an image, applying the entries
      // after the snapshot to an older state would diverge: refuse.
      Status installed = hooks_.snapshots
                             ? hooks_.snapshots->InstallSnapshot(*ready->snapshot)
                             : Status::FailedPrecondition("no snapshot support in this driver");
      if (!installed.ok()) {
        return Fatal(installed.Annotate(
            fmt::format("install snapshot at index {}", ready->snapshot->index)));
      }
    }
    log_.Persist(ready->snapshot, ready->entries, ready->hard_state, ready->must_sync,
                 [this, ready](Status status) {
                   asio::post(strand_, [this, ready, status] { AfterPersist(ready, status); });
                 });
  }
  // Committed entries an earlier Ready made durable are applied while this one's write is in
  // flight: a put is answered one fsync sooner (raft/DESIGN.md §5, step 5). AfterPersist applies
  // the rest.
  ApplyCommitted(std::span(ready->committed_entries).first(ready->durable_committed));
  if (!persist) AfterPersist(ready, Status::Ok());
}

void RaftDriver::AfterPersist(const std::shared_ptr<raft::Ready>& ready, const Status& status) {
  if (!status.ok()) return Fatal(status);
  for (const raft::Message& m : ready->messages_after_persist) sender_.Send(m);
  ApplyCommitted(std::span(ready->committed_entries).subspan(ready->durable_committed));
  ServeReadStates(ready->read_states);
  if (ready->conf_state) sender_.OnMembership(*ready->conf_state);
  node_->Advance(*ready);
  ready_in_flight_ = false;
  if (hooks_.snapshots) hooks_.snapshots->AfterAdvance(*ready, *node_);
  PublishStatus();
  if (!stopped_) MaybeHandleReady();
}

void RaftDriver::ApplyCommitted(std::span<const raft::Entry> entries) {
  if (entries.empty()) return;
  // After a restart the core hands out entries from the snapshot on; the state machine may have
  // applied some of them already (its applied index is durable with its data). Entries are in
  // index order, so the applied ones are a prefix.
  const LogIndex applied = state_machine_.AppliedIndex();
  const auto first_fresh =
      std::partition_point(entries.begin(), entries.end(),
                           [applied](const raft::Entry& e) { return e.index <= applied; });
  const std::span<const raft::Entry> fresh = entries.subspan(first_fresh - entries.begin());
  // Timed on the driver's clock (RaftDriverOptions::clock), which tests can move.
  const auto apply_start = Now();
  std::vector<ApplyOutcome> outcomes =
      fresh.empty() ? std::vector<ApplyOutcome>{} : state_machine_.Apply(fresh);
  const auto apply_time = Now() - apply_start;
  apply_latency_.Observe(apply_time);
  if (apply_time > kSlowApply) ++counters_.slow_applies;
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    auto it = pending_proposals_.find(fresh[i].index);
    if (it == pending_proposals_.end()) continue;
    PendingProposal pending = std::move(it->second);
    pending_proposals_.erase(it);
    if (fresh[i].term != pending.term && !options_.mutations.answer_replaced_entry) {
      // Another leader's entry took this index: ours was never committed (Raft §5.3).
      ++counters_.proposals_failed;
      pending.done(LeaderChanged(), {});
      continue;
    }
    ++counters_.proposals_committed;
    const ApplyOutcome& outcome = outcomes[i];
    pending.done(outcome.status, outcome.response);
  }
  ServeWaitingReads();
}

void RaftDriver::ServeReadStates(const std::vector<raft::ReadState>& states) {
  for (const raft::ReadState& rs : states) {
    // The index also covers every earlier request still pending (contexts grow): their reads
    // arrived before this request was made. A request whose answer was lost is served here.
    auto end = pending_reads_.upper_bound(rs.context);
    if (end == pending_reads_.begin()) continue;
    // Keep the queue ordered by index so one pass serves every read the apply reached.
    auto pos = reads_waiting_apply_.end();
    while (pos != reads_waiting_apply_.begin() && std::prev(pos)->index > rs.index) --pos;
    std::vector<WaitingRead> served;
    for (auto it = pending_reads_.begin(); it != end; ++it) {
      for (ReadCallback& done : it->second) served.push_back({rs.index, std::move(done)});
    }
    reads_waiting_apply_.insert(pos, std::make_move_iterator(served.begin()),
                                std::make_move_iterator(served.end()));
    pending_reads_.erase(pending_reads_.begin(), end);
  }
  ServeWaitingReads();
}

void RaftDriver::ServeWaitingReads() {
  LogIndex applied = state_machine_.AppliedIndex();
  while (!reads_waiting_apply_.empty() &&
         (reads_waiting_apply_.front().index <= applied || options_.mutations.read_before_apply)) {
    ReadCallback done = std::move(reads_waiting_apply_.front().done);
    reads_waiting_apply_.pop_front();
    done(Status::Ok());
  }
}

void RaftDriver::OnSoftState(const raft::SoftState& soft) {
  if (soft.leader != last_leader_) {
    SPDLOG_INFO("{} node={:x} term={} leader={:x} previous-leader={:x} role={}",
                soft.leader == raft::kNoNode ? "leader lost" : "leader changed", options_.raft.id,
                soft.term, soft.leader, last_leader_, raft::RoleName(soft.role));
    ++counters_.leader_changes;
    // A ReadIndex request in flight to (or at) the old leader may never be answered.
    FailAllReads(LeaderChanged());
    last_leader_ = soft.leader;
  }
}

void RaftDriver::FailAllReads(const Status& status) {
  auto pending = std::move(pending_reads_);
  pending_reads_.clear();
  for (auto& [context, batch] : pending) {
    for (ReadCallback& done : batch) done(status);
  }
  // Reads already confirmed only wait for the local apply; they stay valid across a leader change.
  // Reads not yet sent go to whichever leader there is when their request is made.
  if (status.message() == Stopping().message()) {
    auto unsent = std::move(read_batch_);
    read_batch_.clear();
    for (ReadCallback& done : unsent) done(status);
    auto waiting = std::move(reads_waiting_apply_);
    reads_waiting_apply_.clear();
    for (auto& w : waiting) w.done(status);
  }
}

void RaftDriver::FailAllProposals(const Status& status) {
  auto pending = std::move(pending_proposals_);
  pending_proposals_.clear();
  for (auto& [index, p] : pending) p.done(status, {});
  auto batch = std::move(proposal_batch_);
  proposal_batch_.clear();
  for (auto& [request, done] : batch) done(status, {});
}

void RaftDriver::PublishStatus() {
  raft::NodeStatus s = node_->Status();
  std::lock_guard lock(status_mu_);
  status_.leader = s.leader;
  status_.term = s.term;
  status_.role = s.role;
  status_.commit = s.commit;
  status_.applied = state_machine_.AppliedIndex();
  status_.last_index = s.last_index;
  status_.lease_valid = s.lease_valid;
  status_.election_timeout_base_ticks = s.election_timeout_base_ticks;
  status_.leader_changes = counters_.leader_changes;
  status_.lease_reads = counters_.lease_reads;
  status_.read_index_reads = counters_.read_index_reads;
  status_.read_index_requests = counters_.read_index_requests;
  status_.proposals_committed = counters_.proposals_committed;
  status_.proposals_failed = counters_.proposals_failed;
  status_.proposals_pending = pending_proposals_.size() + proposal_batch_.size();
  status_.slow_applies = counters_.slow_applies;
  status_.timing = s.timing;
  status_.voter_floors.clear();
  for (const raft::PeerStatus& p : s.progress) {
    if (p.learner) continue;
    status_.voter_floors.emplace_back(
        p.id, p.id == s.id ? s.timing.election_timeout_min_ticks : p.reported_floor);
  }
}

void RaftDriver::PublishLease() {
  lease_commit_.store(node_->commit_index().value());
  if (stopped_ || !node_->LeaseValid()) {
    lease_until_ns_.store(0);
    return;
  }
  // The core holds the lease while its tick count is below lease_expiry_tick; the driver's tick
  // k is due at tick_epoch_ + k * tick (CatchUpTicks), so the lease holds before this instant.
  // It is exactly what CatchUpTicks() + LeaseValid() on the strand would decide at any later
  // time (a capped catch-up only happens past every lease).
  const std::int64_t left = node_->lease_expiry_tick() - node_->now_ticks();
  const auto until = tick_epoch_ + (ticks_done_ + left) * options_.tick;
  lease_until_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(until.time_since_epoch()).count());
}

bool RaftDriver::TryLeaseRead() {
  const std::int64_t until = lease_until_ns_.load();
  if (until == 0) return false;
  const std::int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Now().time_since_epoch()).count();
  if (now >= until) return false;
  if (state_machine_.AppliedIndex() < LogIndex(lease_commit_.load())) return false;
  fast_lease_reads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// Counters only (cheap): read paths publish them at once so metrics and tests see every read.
void RaftDriver::PublishCounters() {
  std::lock_guard lock(status_mu_);
  status_.lease_reads = counters_.lease_reads;
  status_.read_index_reads = counters_.read_index_reads;
  status_.read_index_requests = counters_.read_index_requests;
}

DriverStatus RaftDriver::status() const {
  DriverStatus s;
  {
    std::lock_guard lock(status_mu_);
    s = status_;
  }
  s.lease_reads += fast_lease_reads_.load(std::memory_order_relaxed);
  return s;
}

void RaftDriver::Fatal(const Status& status) {
  spdlog::critical("node={:x} fail-stop: {}", options_.raft.id, status.ToString());
  stopped_ = true;
  lease_until_ns_.store(0);
  tick_timer_.cancel();
  if (options_.on_fatal) return options_.on_fatal(status);
  std::abort();
}

void RaftDriver::RenderMetrics(MetricsText& m) const {
  const DriverStatus s = status();
  m.Gauge("epoch_raft_term", "Current Raft term.", s.term.value());
  m.Gauge("epoch_raft_is_leader", "1 if this node is the leader.",
          s.role == raft::Role::kLeader ? 1 : 0);
  m.Gauge("epoch_raft_commit_index", "Commit index.", s.commit.value());
  m.Gauge("epoch_raft_applied_index", "Applied index.", s.applied.value());
  m.Gauge("epoch_raft_last_index", "Last log index.", s.last_index.value());
  m.Gauge("epoch_raft_election_timeout_base_seconds",
          "Adaptive election timeout base T (raised by slow disks, high RTT, split votes).",
          static_cast<double>(s.election_timeout_base_ticks * options_.tick.count()) / 1000.0);
  m.Counter("epoch_raft_leader_changes_total", "Leader changes seen.", s.leader_changes);
  m.Counter("epoch_proposals_committed_total", "Proposals committed.", s.proposals_committed);
  m.Counter("epoch_proposals_failed_total", "Proposals failed.", s.proposals_failed);
  m.Counter("epoch_reads_lease_total", "Linearizable reads served by the leader lease.",
            s.lease_reads);
  m.Counter("epoch_reads_read_index_total", "Linearizable reads through ReadIndex.",
            s.read_index_reads);
  m.Counter("epoch_read_index_requests_total",
            "ReadIndex rounds (the reads that queue together share one).", s.read_index_requests);
  m.Histogram("epoch_raft_tick_delay_seconds",
              "How late each Raft tick ran after it was due: the driver's strand was busy or its "
              "thread had no CPU.",
              tick_delay_);
  m.Histogram("epoch_raft_apply_seconds",
              "Time to apply each batch of committed entries on the driver's strand.",
              apply_latency_);
}

}  // namespace epoch::server
