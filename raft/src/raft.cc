// Construction, role transitions, the term rules common to every message, role dispatch, ticks.
#include "raft.h"

#include <algorithm>

#include "quorum.h"

namespace epoch::raft {

Raft::Raft(const Config& config, const LogReader& log, std::uint64_t seed)
    : id_(config.id),
      config_(config),
      logger_(config.logger),
      rng_(seed),
      log_(log, id_, term_),
      timeout_base_(config.election_timeout_min_ticks),
      leader_gap_ticks_(LatencyWindowTicks(config)),
      round_trip_ticks_(LatencyWindowTicks(config)),
      persist_latency_ticks_(LatencyWindowTicks(config)) {
  const epoch::Status valid = config.Validate();
  RAFT_ASSERT(valid.ok(), "invalid raft config: {}", valid.ToString());
  const HardState hs = log.InitialHardState();
  const SnapshotMeta snapshot = log.LastSnapshot();
  term_ = std::max(hs.term, snapshot.term);
  vote_ = hs.term == term_ ? hs.vote : kNoNode;
  applied_ = snapshot.index;
  applying_ = snapshot.index;
  conf_ = snapshot.conf;
  conf_index_ = snapshot.index;
  RedrawElectionTimeout();
  // Boot counts as leader contact (see ticks_since_leader_contact_).
  ticks_since_leader_contact_ = 0;
  hold_until_tick_ = config.boot_withhold_ticks;
  prev_soft_ = soft_state();
  prev_hard_ = HardState{hs.term, hs.vote, hs.commit};
  Log(LogLevel::kInfo, "started: term {} vote {} commit {} applied {} last {} voters {}", term_,
      vote_, log_.committed(), applied_, log_.LastIndex(), conf_.voters.size());
}

// ---------------------------------------------------------------------------------------------
// Role transitions. Each clears the state of the role it leaves.

void Raft::ResetRoleState(Term term) {
  if (term_ != term) {
    RAFT_ASSERT(term > term_, "term going backwards to {}", term);
    RAFT_ASSERT(term.value() < kMaxPlausibleValue, "term {} beyond the plausible bound", term);
    term_ = term;
    vote_ = kNoNode;
  }
  leader_ = kNoNode;
  election_elapsed_ = 0;
  heartbeat_elapsed_ = 0;
  RedrawElectionTimeout();
  votes_.clear();
  progress_.clear();
  transfer_target_ = kNoNode;
  transfer_elapsed_ = 0;
  timeout_now_sent_ = false;
  pending_conf_index_ = LogIndex(0);
  uncommitted_bytes_ = 0;
  durability_stall_elapsed_ = 0;
  rounds_.Reset();
  quorum_acked_round_ = 0;
  lease_expiry_tick_ = 0;
  read_only_.Clear();
}

void Raft::BecomeFollower(Term term, NodeId leader) {
  const Role old_role = role_;
  ResetRoleState(term);
  role_ = Role::kFollower;
  leader_ = leader;
  if (old_role == Role::kLeader) ticks_since_leader_contact_ = 0;  // we were the live leader
  if (old_role != Role::kFollower) {
    Log(LogLevel::kInfo, "became follower (was {}), leader {}", RoleName(old_role), leader);
  }
}

void Raft::BecomePreCandidate() {
  RAFT_ASSERT(role_ != Role::kLeader, "leader cannot become pre-candidate");
  // A pre-candidate keeps its term and vote (dissertation §9.6): it only asks.
  ResetRoleState(term_);
  role_ = Role::kPreCandidate;
  pre_campaign_tick_ = now_;
  Log(LogLevel::kInfo, "became pre-candidate at term {}", term_);
}

void Raft::BecomeCandidate() {
  RAFT_ASSERT(role_ != Role::kLeader, "leader cannot become candidate");
  // Raft §5.2: increment current_term, vote for self. The term never wraps.
  RAFT_ASSERT(term_.Next() > term_, "term {} would wrap", term_);
  ResetRoleState(term_.Next());
  vote_ = id_;
  role_ = Role::kCandidate;
  Log(LogLevel::kInfo, "became candidate at term {}", term_);
}

void Raft::BecomeLeader() {
  RAFT_ASSERT(role_ == Role::kCandidate, "only a candidate becomes leader (was {})",
              RoleName(role_));
  ResetRoleState(term_);
  role_ = Role::kLeader;
  leader_ = id_;
  ticks_since_leader_contact_ = 0;
  campaigned_without_leader_ = false;
  ResetProgress();
  // Conservatively treat anything in the log as a possibly unapplied conf change.
  pending_conf_index_ = log_.LastIndex();
  // The first round: the no-op's AppendEntries carry it, so their answers start the lease.
  const std::uint64_t round = rounds_.Start(now_);
  SelfProgress().acked_round = round;
  // Raft §5.4.2 / §8: a no-op entry of the new term lets the leader commit (and learn the commit
  // index of) everything before it.
  AppendAsLeader({Entry{term_, log_.LastIndex().Next(), EntryType::kNormal, {}}});
  Log(LogLevel::kInfo, "became leader at term {}, last index {}", term_, log_.LastIndex());
  BroadcastAppend(true);
}

// ---------------------------------------------------------------------------------------------
// Step: the term rules of Raft §5.1 (Fig. 2 "Rules for servers"), then the role's handler.

namespace {

// Messages come from the network: a malformed one is dropped here, so that the assertions further
// in (which guard our own invariants) can only fire on our own bugs.
bool Plausible(std::uint64_t value) { return value < kMaxPlausibleValue; }

bool PlausibleNumbers(const Message& m) {
  if (!Plausible(m.term.value()) || !Plausible(m.log_term.value()) || !Plausible(m.index.value()) ||
      !Plausible(m.commit.value()) || !Plausible(m.reject_hint.value())) {
    return false;
  }
  for (const Entry& e : m.entries) {
    if (!Plausible(e.term.value()) || !Plausible(e.index.value())) return false;
  }
  return !m.snapshot ||
         (Plausible(m.snapshot->term.value()) && Plausible(m.snapshot->index.value()));
}

bool WellFormed(const Message& m) {
  if (m.term.IsZero() || !PlausibleNumbers(m)) return false;
  switch (m.type) {
    case MessageType::kAppendEntries:
      for (std::size_t i = 0; i < m.entries.size(); ++i) {
        const Entry& e = m.entries[i];
        if (e.index != m.index + (i + 1) || e.term > m.term) return false;
        if (e.term < (i == 0 ? m.log_term : m.entries[i - 1].term)) return false;
      }
      return m.log_term <= m.term;
    case MessageType::kInstallSnapshot:
      return m.snapshot.has_value() && !m.snapshot->index.IsZero() && m.snapshot->term <= m.term;
    default: return true;
  }
}

}  // namespace

StepResult Raft::Step(const Message& m) {
  if (m.to != id_ || m.from == kNoNode || m.from == id_) return StepResult::kIgnored;
  if (!WellFormed(m)) {
    Log(LogLevel::kWarning, "dropped malformed {}", DescribeMessage(m));
    return StepResult::kIgnored;
  }
  if (m.type == MessageType::kTimeoutNow && (m.term != term_ || m.from != leader_)) {
    // Only the leader of our term may tell us to campaign (it does so once we have its whole
    // log). Anyone else would unseat a live leader that may still serve lease reads.
    Log(LogLevel::kWarning, "ignored TimeoutNow from {} at term {}: the leader of term {} is {}",
        m.from, m.term, term_, leader_);
    return StepResult::kIgnored;
  }
  const bool vote_request = m.type == MessageType::kRequestVote || m.type == MessageType::kPreVote;
  if (vote_request && ShouldWithholdVote(m)) {
    Log(LogLevel::kDebug, "withheld {} from {} at term {}: leader heard {} ticks ago",
        MessageTypeName(m.type), m.from, m.term, ticks_since_leader_contact_);
    return StepResult::kWithheld;
  }
  if (m.term > term_) {
    const bool keeps_term =
        m.type == MessageType::kPreVote || (m.type == MessageType::kPreVoteResponse && !m.reject);
    if (!keeps_term) BecomeFollower(m.term, IsFromLeader(m.type) ? m.from : kNoNode);
  } else if (m.term < term_) {
    return StepStaleTerm(m);
  }
  if (vote_request) {
    HandleVoteRequest(m);
    return StepResult::kOk;
  }
  switch (role_) {
    case Role::kLeader: return StepLeader(m);
    case Role::kPreCandidate:
    case Role::kCandidate: return StepCandidate(m);
    case Role::kFollower: return StepFollower(m);
  }
  return StepResult::kIgnored;
}

StepResult Raft::StepStaleTerm(const Message& m) {
  if ((config_.check_quorum || config_.pre_vote) &&
      (m.type == MessageType::kAppendEntries || m.type == MessageType::kHeartbeat)) {
    // A deposed leader (e.g. back from a partition) learns our term from this answer and steps
    // down; with pre-vote the nodes that moved on would otherwise never tell it.
    Message resp;
    resp.type = MessageType::kAppendEntriesResponse;
    resp.to = m.from;
    Send(std::move(resp));
  } else if (m.type == MessageType::kPreVote) {
    Message resp;
    resp.type = MessageType::kPreVoteResponse;
    resp.to = m.from;
    resp.term = term_;
    resp.reject = true;
    Send(std::move(resp));
  }
  return StepResult::kStaleTerm;
}

StepResult Raft::StepLeader(const Message& m) {
  auto it = progress_.find(m.from);
  switch (m.type) {
    case MessageType::kAppendEntriesResponse:
      if (it == progress_.end()) return StepResult::kIgnored;
      HandleAppendResponse(m, it->second);
      return StepResult::kOk;
    case MessageType::kHeartbeatResponse:
      if (it == progress_.end()) return StepResult::kIgnored;
      HandleHeartbeatResponse(m, it->second);
      return StepResult::kOk;
    case MessageType::kReadIndex:
      if (it == progress_.end()) return StepResult::kIgnored;
      ServeRead(m.context, m.from);
      return StepResult::kOk;
    case MessageType::kAppendEntries:
    case MessageType::kHeartbeat:
    case MessageType::kInstallSnapshot:
      Log(LogLevel::kError, "{} from {} claims leadership of our term", MessageTypeName(m.type),
          m.from);
      return StepResult::kIgnored;
    default: return StepResult::kIgnored;
  }
}

StepResult Raft::StepCandidate(const Message& m) {
  switch (m.type) {
    case MessageType::kAppendEntries:
      BecomeFollower(m.term, m.from);  // Raft §5.2: a leader of our term exists
      HandleAppendEntries(m);
      return StepResult::kOk;
    case MessageType::kHeartbeat:
      BecomeFollower(m.term, m.from);
      HandleHeartbeat(m);
      return StepResult::kOk;
    case MessageType::kInstallSnapshot:
      BecomeFollower(m.term, m.from);
      HandleInstallSnapshot(m);
      return StepResult::kOk;
    case MessageType::kPreVoteResponse:
      if (role_ != Role::kPreCandidate) return StepResult::kIgnored;
      return HandleVoteResponse(m);
    case MessageType::kRequestVoteResponse:
      if (role_ != Role::kCandidate) return StepResult::kIgnored;
      return HandleVoteResponse(m);
    default: return StepResult::kIgnored;
  }
}

StepResult Raft::StepFollower(const Message& m) {
  switch (m.type) {
    case MessageType::kAppendEntries: HandleAppendEntries(m); return StepResult::kOk;
    case MessageType::kHeartbeat: HandleHeartbeat(m); return StepResult::kOk;
    case MessageType::kInstallSnapshot: HandleInstallSnapshot(m); return StepResult::kOk;
    case MessageType::kTimeoutNow:
      if (!Promotable()) return StepResult::kIgnored;
      Log(LogLevel::kInfo, "TimeoutNow from {}: campaigning at once", m.from);
      StartCampaign(/*transfer=*/true);
      return StepResult::kOk;
    case MessageType::kReadIndexResponse:
      if (m.reject) return StepResult::kOk;
      read_states_.push_back(ReadState{m.context, m.index, m.via_lease});
      return StepResult::kOk;
    default: return StepResult::kIgnored;
  }
}

// ---------------------------------------------------------------------------------------------
// Ticks.

void Raft::CatchUp(std::int64_t ticks) {
  if (ticks <= 0) return;
  stall_hold_until_tick_ = std::max(stall_hold_until_tick_, now_ + ticks + config_.heartbeat_ticks);
  for (std::int64_t i = 0; i < ticks; ++i) Tick();
}

// Whether a timeout that has been due for `elapsed` of its `timeout` ticks waits for the stall
// hold (CatchUp): only while the hold lasts, and never past a second timeout.
bool Raft::HeldAfterStall(std::int64_t elapsed, std::int64_t timeout) const {
  return now_ < stall_hold_until_tick_ && elapsed < 2 * timeout;
}

void Raft::Tick() {
  ++now_;
  if (role_ == Role::kLeader) {
    TickHeartbeat();
  } else {
    TickElection();
  }
}

void Raft::TickElection() {
  ++election_elapsed_;
  ++ticks_since_leader_contact_;
  const bool leader_live =
      leader_ != kNoNode && ticks_since_leader_contact_ < config_.election_timeout_min_ticks;
  stable_leadership_ticks_ = leader_live ? stable_leadership_ticks_ + 1 : 0;
  MaybeAdaptElectionTimeout();
  if (!Promotable() || election_elapsed_ < randomized_election_timeout_) return;
  if (DeferCampaignAfterGrant()) return;  // checked again next tick
  if (now_ < hold_until_tick_) return;    // a lowered floor's hold (UpdateTiming)
  if (HeldAfterStall(election_elapsed_, randomized_election_timeout_)) return;
  election_elapsed_ = 0;
  // The previous election we took part in produced no leader: back off (split votes).
  if (campaigned_without_leader_) BackOffElectionTimeout();
  StartCampaign(/*transfer=*/false);
}

void Raft::TickHeartbeat() {
  ++heartbeat_elapsed_;
  ++election_elapsed_;
  ticks_since_leader_contact_ = 0;
  ++stable_leadership_ticks_;
  MaybeAdaptElectionTimeout();
  CheckDurabilityStall();
  if (role_ != Role::kLeader) return;
  // CheckQuorum runs once per election timeout base: the floor while latency is normal, longer
  // while measured round trips are long (then the followers' own timeouts are raised too, so a
  // silence shorter than the base is load, not a partition). Safety does not depend on it: the
  // lease is counted from acknowledged heartbeat rounds and the floor, never from this check.
  if (election_elapsed_ >= timeout_base_ && !HeldAfterStall(election_elapsed_, timeout_base_)) {
    election_elapsed_ = 0;
    if (config_.check_quorum) {
      if (!QuorumActive()) {
        Log(LogLevel::kWarning, "check quorum: no quorum heard within {} ticks, stepping down",
            timeout_base_);
        BecomeFollower(term_, kNoNode);
        return;
      }
      for (auto& [id, pr] : progress_) pr.recent_active = id == id_;
    }
  }
  if (transfer_target_ != kNoNode &&
      ++transfer_elapsed_ >= config_.EffectiveTransferTimeoutTicks()) {
    Log(LogLevel::kWarning, "leadership transfer to {} timed out", transfer_target_);
    AbortTransfer();
  }
  if (heartbeat_elapsed_ >= config_.heartbeat_ticks) {
    heartbeat_elapsed_ = 0;
    BroadcastHeartbeat();
  }
}

// ---------------------------------------------------------------------------------------------
// Output.

void Raft::Send(Message m) {
  m.from = id_;
  // PreVote carries the term it would campaign at; a granted PreVoteResponse echoes it.
  if (m.type != MessageType::kPreVote && m.type != MessageType::kPreVoteResponse) m.term = term_;
  // Answers to a leader carry the floor we withhold votes for after its message (QuorumFloor).
  if (m.type == MessageType::kAppendEntriesResponse || m.type == MessageType::kHeartbeatResponse) {
    m.floor = config_.election_timeout_min_ticks;
  }
  bool after_persist = false;
  switch (m.type) {
    case MessageType::kRequestVote:
      // Our term and self-vote must be durable before anyone can elect us with them.
      after_persist = true;
      break;
    case MessageType::kRequestVoteResponse:
    case MessageType::kAppendEntriesResponse:
      // A vote or an acknowledgement promises durable state (Raft Fig. 2: "persistent state,
      // updated on stable storage before responding to RPCs").
      after_persist = !config_.mutations.reply_before_persist;
      break;
    default: break;
  }
  (after_persist ? messages_after_persist_ : messages_).push_back(std::move(m));
}

NodeStatus Raft::Status() const {
  NodeStatus s;
  s.id = id_;
  s.role = role_;
  s.term = term_;
  s.vote = vote_;
  s.leader = leader_;
  s.commit = log_.committed();
  s.applied = applied_;
  s.first_index = log_.FirstIndex();
  s.last_index = log_.LastIndex();
  s.conf = conf_;
  s.now_ticks = now_;
  s.election_timeout_ticks = randomized_election_timeout_;
  s.election_timeout_base_ticks = timeout_base_;
  s.lease_valid = LeaseValid();
  s.lease_expiry_tick = lease_expiry_tick_;
  s.timing = config_.timing();
  s.transfer_target = transfer_target_;
  for (const auto& [id, pr] : progress_) {
    PeerStatus p;
    p.id = id;
    p.learner = pr.learner;
    p.state = pr.state;
    p.match = pr.match;
    p.next = pr.next;
    p.inflight_msgs = pr.inflights.count();
    p.inflight_bytes = pr.inflights.bytes();
    p.pending_snapshot = pr.pending_snapshot;
    p.recent_active = pr.recent_active;
    p.acked_round = pr.acked_round;
    p.reported_floor = pr.reported_floor;
    s.progress.push_back(p);
  }
  return s;
}

}  // namespace epoch::raft
