// Log replication (Raft §5.3): the leader's AppendEntries pipeline, commit rule (§5.4.2),
// heartbeats, snapshots; the follower's AppendEntries / InstallSnapshot receivers.
#include <algorithm>

#include "quorum.h"
#include "raft.h"

namespace epoch::raft {

Progress& Raft::SelfProgress() {
  auto it = progress_.find(id_);
  RAFT_ASSERT(it != progress_.end(), "leader without its own progress");
  return it->second;
}

void Raft::ResetProgress() {
  progress_.clear();
  const LogIndex next = log_.LastIndex().Next();
  auto add = [&](NodeId id, bool learner) {
    auto [it, inserted] = progress_.emplace(
        id, Progress(next, config_.max_inflight_msgs, config_.max_inflight_bytes));
    it->second.learner = learner;
  };
  for (NodeId id : conf_.voters) add(id, false);
  for (NodeId id : conf_.learners) add(id, true);
  if (progress_.find(id_) == progress_.end()) add(id_, false);
  Progress& self = SelfProgress();
  self.match = log_.DurableIndex();
  self.recent_active = true;
}

void Raft::AppendAsLeader(std::vector<Entry> entries) {
  LogIndex index = log_.LastIndex();
  for (Entry& e : entries) {
    e.term = term_;
    e.index = ++index;
    uncommitted_bytes_ += e.data.size();
  }
  log_.Append(std::move(entries));
  // The leader's own copy counts toward the quorum only once durable (OnPersisted).
}

bool Raft::MaybeSendAppend(NodeId peer, Progress& pr, bool send_if_empty) {
  if (pr.IsPaused()) return false;
  const LogIndex prev = pr.next - 1;
  const std::optional<Term> prev_term = log_.TermAt(prev);
  if (!prev_term) return MaybeSendSnapshot(peer, pr);  // compacted: only a snapshot helps
  Message m;
  m.type = MessageType::kAppendEntries;
  m.to = peer;
  m.index = prev;
  m.log_term = *prev_term;
  if (pr.next <= log_.LastIndex()) {
    m.entries = log_.Slice(pr.next, log_.LastIndex().Next(), config_.max_msg_bytes);
  }
  if (m.entries.empty() && !send_if_empty) return false;
  m.commit = log_.committed();
  m.round = rounds_.last();
  const bool had_entries = !m.entries.empty();
  const LogIndex last = had_entries ? m.entries.back().index : prev;
  const std::uint64_t bytes = m.EntryBytes();
  Send(std::move(m));
  pr.SentEntries(last, bytes, had_entries);
  return true;
}

bool Raft::MaybeSendSnapshot(NodeId peer, Progress& pr) {
  const SnapshotMeta snapshot = log_.Snapshot();
  RAFT_ASSERT(!snapshot.IsEmpty(), "peer {} needs entry {} but the log has no snapshot", peer,
              pr.next);
  Message m;
  m.type = MessageType::kInstallSnapshot;
  m.to = peer;
  m.index = snapshot.index;
  m.log_term = snapshot.term;
  m.round = rounds_.last();
  m.snapshot = snapshot;
  Send(std::move(m));
  pr.BecomeSnapshot(snapshot.index);
  Log(LogLevel::kInfo, "peer {} needs compacted entry {}: sending snapshot {}/t{}", peer, pr.next,
      snapshot.index, snapshot.term);
  return true;
}

void Raft::BroadcastAppend(bool send_if_empty) {
  for (auto& [id, pr] : progress_) {
    if (id == id_) continue;
    if (!MaybeSendAppend(id, pr, send_if_empty)) continue;
    // Pipelining: in the replicate state, fill the window now rather than one message per ack.
    while (MaybeSendAppend(id, pr, false)) {
    }
  }
}

void Raft::BroadcastHeartbeat() {
  const std::uint64_t round = rounds_.Start(now_);
  for (auto& [id, pr] : progress_) {
    if (id == id_) {
      pr.acked_round = round;  // the leader confirms itself
      continue;
    }
    Message m;
    m.type = MessageType::kHeartbeat;
    m.to = id;
    // Only what the follower is known to hold can be declared committed to it.
    m.commit = std::min(pr.match, log_.committed());
    m.round = round;
    Send(std::move(m));
  }
  UpdateQuorumRound();  // a single voter confirms its own round
}

bool Raft::MaybeCommit() {
  if (conf_.voters.empty()) return false;
  std::vector<LogIndex> matches;
  for (NodeId voter : conf_.voters) {
    auto it = progress_.find(voter);
    matches.push_back(it == progress_.end() ? LogIndex(0) : it->second.match);
  }
  const LogIndex quorum_index = MajorityValue(matches);
  if (quorum_index <= log_.committed()) return false;
  // Raft §5.4.2: only entries of the current term are committed by counting replicas; earlier
  // ones become committed through them (Log Matching). Counting older terms is the Fig. 8 bug.
  if (!config_.mutations.commit_prior_term_by_counting && log_.TermAt(quorum_index) != term_) {
    return false;
  }
  log_.CommitTo(quorum_index);
  return true;
}

void Raft::AfterCommitAdvanced() {
  ReleaseReadsAwaitingCommit();
  // Tell the followers at once (they apply sooner), as etcd raft does.
  BroadcastAppend(true);
}

void Raft::HandleAppendResponse(const Message& m, Progress& pr) {
  pr.recent_active = true;
  pr.reported_floor = m.floor;
  AckRound(pr, m.round);
  if (m.reject) {
    // Fast backtracking: jump to the largest index of our log that may match the follower's
    // hint, instead of decrementing next one entry per round trip.
    LogIndex hint = m.reject_hint;
    if (!m.log_term.IsZero()) hint = log_.FindConflictByTerm(m.reject_hint, m.log_term).first;
    if (pr.MaybeDecrTo(m.index, hint)) {
      if (pr.state == ProgressState::kReplicate) pr.BecomeProbe();
      MaybeSendAppend(m.from, pr, true);
    }
    return;
  }
  const bool was_paused = pr.IsPaused();
  // A probe answered at the match we already knew still proves the match point: replicate. The
  // answer must cover the probe (its prev index is next - 1): an answer without an index — what a
  // member of a newer term sends back for a stale append (StepStaleTerm) — confirms nothing, and
  // taking it for a probe answered at match 0 would set next to 1 and wedge the peer.
  const bool probe_confirmed =
      pr.state == ProgressState::kProbe && pr.match == m.index && m.index.Next() >= pr.next;
  if (!pr.MaybeUpdate(m.index) && !probe_confirmed) return;
  switch (pr.state) {
    case ProgressState::kProbe: pr.BecomeReplicate(); break;
    case ProgressState::kSnapshot:
      if (pr.match.Next() >= log_.FirstIndex()) {
        pr.BecomeProbe();
        pr.BecomeReplicate();
      }
      break;
    case ProgressState::kReplicate: pr.inflights.FreeLE(m.index); break;
  }
  if (MaybeCommit()) {
    AfterCommitAdvanced();
  } else if (was_paused) {
    MaybeSendAppend(m.from, pr, true);
  }
  // Pipelining: keep the window full.
  while (MaybeSendAppend(m.from, pr, false)) {
  }
  if (m.from == transfer_target_ && pr.match == log_.LastIndex()) SendTimeoutNow(m.from);
}

void Raft::HandleHeartbeatResponse(const Message& m, Progress& pr) {
  pr.recent_active = true;
  pr.probe_sent = false;
  pr.reported_floor = m.floor;
  AckRound(pr, m.round);
  if (role_ != Role::kLeader) return;
  // A full window of lost messages would stall the peer: free one slot per heartbeat answer.
  if (pr.state == ProgressState::kReplicate && pr.inflights.Full()) pr.inflights.FreeFirst();
  if (pr.match < log_.LastIndex() || pr.state == ProgressState::kProbe) {
    MaybeSendAppend(m.from, pr, true);
  }
}

void Raft::HandleAppendEntries(const Message& m) {
  HeardFromLeader(m.from);
  Message resp;
  resp.type = MessageType::kAppendEntriesResponse;
  resp.to = m.from;
  resp.round = m.round;
  if (m.index < log_.committed()) {
    // Everything up to our commit index matches every leader's log (State Machine Safety).
    resp.index = log_.committed();
    Send(std::move(resp));
    return;
  }
  if (std::optional<LogIndex> last_new =
          log_.MaybeAppend(m.index, m.log_term, m.commit, m.entries)) {
    resp.index = *last_new;
    Send(std::move(resp));
    return;
  }
  // Raft §5.3 consistency check failed. Hint: the largest index <= min(prev, our last) whose term
  // is <= the leader's prev term; every index after it surely conflicts or is missing.
  const auto [hint_index, hint_term] =
      log_.FindConflictByTerm(std::min(m.index, log_.LastIndex()), m.log_term);
  resp.reject = true;
  resp.index = m.index;
  resp.reject_hint = hint_index;
  resp.log_term = hint_term;
  Send(std::move(resp));
}

void Raft::HandleHeartbeat(const Message& m) {
  HeardFromLeader(m.from);
  // m.commit <= our match index as the leader knows it, so these entries are the leader's.
  log_.CommitTo(std::min(m.commit, log_.LastIndex()));
  Message resp;
  resp.type = MessageType::kHeartbeatResponse;
  resp.to = m.from;
  resp.round = m.round;
  Send(std::move(resp));
}

void Raft::HandleInstallSnapshot(const Message& m) {
  HeardFromLeader(m.from);
  if (!m.snapshot) return;
  const SnapshotMeta& snapshot = *m.snapshot;
  Message resp;
  resp.type = MessageType::kAppendEntriesResponse;
  resp.to = m.from;
  resp.round = m.round;
  if (snapshot.index <= log_.committed()) {
    resp.index = log_.committed();  // nothing new in it
  } else if (log_.MatchTerm(snapshot.index, snapshot.term)) {
    log_.CommitTo(snapshot.index);  // our log already has it: fast-forward
    resp.index = snapshot.index;
  } else {
    Log(LogLevel::kInfo, "installing snapshot {}/t{} from {}", snapshot.index, snapshot.term,
        m.from);
    log_.Restore(snapshot);
    conf_ = snapshot.conf;
    conf_index_ = snapshot.index;
    conf_changed_ = true;
    resp.index = snapshot.index;
  }
  Send(std::move(resp));
}

bool Raft::QuorumActive() const {
  std::size_t active = 0;
  for (NodeId voter : conf_.voters) {
    auto it = progress_.find(voter);
    if (voter == id_ || (it != progress_.end() && it->second.recent_active)) ++active;
  }
  return active >= MajorityOf(conf_.voters.size());
}

bool Raft::OtherVoterDurablePast(LogIndex index) const {
  for (NodeId voter : conf_.voters) {
    if (voter == id_) continue;
    auto it = progress_.find(voter);
    if (it != progress_.end() && it->second.match > index) return true;
  }
  return false;
}

void Raft::CheckDurabilityStall() {
  if (log_.LastIndex() <= SelfProgress().match) {
    durability_stall_elapsed_ = 0;
    return;
  }
  if (++durability_stall_elapsed_ < config_.durability_stall_ticks) return;
  // Leadership follows durable progress (docs/timing-and-safety.md §6). A leader whose WAL cannot
  // sync keeps followers from electing a healthy node while committing nothing itself. But if no
  // voter has made durable what this one could not, every disk is slow (shared, or the whole
  // machine saturated): an election would wait on the same fsyncs, so keep leading until a
  // healthier voter shows itself.
  if (!OtherVoterDurablePast(SelfProgress().match)) return;
  Log(LogLevel::kWarning, "own log not durable past {} for {} ticks (last {}): stepping down",
      SelfProgress().match, durability_stall_elapsed_, log_.LastIndex());
  BecomeFollower(term_, kNoNode);
}

}  // namespace epoch::raft
