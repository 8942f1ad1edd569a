// Leader election (Raft §5.2, §5.4.1), PreVote (dissertation §9.6), vote withholding and the
// adaptive election timeout.
#include <algorithm>

#include "quorum.h"
#include "raft.h"

namespace epoch::raft {

void Raft::Campaign() { StartCampaign(/*transfer=*/false); }

void Raft::StartCampaign(bool transfer) {
  if (role_ == Role::kLeader) return;
  if (!Promotable()) {
    Log(LogLevel::kDebug, "not campaigning: not a voter");
    return;
  }
  if (HasUnappliedConfChanges()) {
    // Our voter set may be about to change; campaigning with the old one could split the cluster.
    if (transfer) {
      deferred_transfer_term_ = term_;
      deferred_transfer_tick_ = now_;
      Log(LogLevel::kInfo, "transfer campaign waits until committed conf changes are applied");
    } else {
      Log(LogLevel::kInfo, "not campaigning: committed conf changes are not applied yet");
    }
    return;
  }
  deferred_transfer_term_ = Term(0);
  campaigned_without_leader_ = true;
  if (config_.pre_vote && !transfer) {
    CampaignRound(MessageType::kPreVote, false);
  } else {
    CampaignRound(MessageType::kRequestVote, transfer);
  }
}

void Raft::CampaignRound(MessageType type, bool transfer) {
  Term vote_term;
  if (type == MessageType::kPreVote) {
    BecomePreCandidate();
    vote_term = term_.Next();
  } else {
    BecomeCandidate();
    vote_term = term_;
  }
  votes_[id_] = true;  // our own (pre)vote; a real one is in the hard state of this Ready
  if (TallyVotes(conf_.voters, votes_) == VoteOutcome::kWon) {  // a single voter
    if (type == MessageType::kPreVote) {
      CampaignRound(MessageType::kRequestVote, transfer);
    } else {
      BecomeLeader();
    }
    return;
  }
  for (NodeId voter : conf_.voters) {
    if (voter != id_) SendVoteRequest(type, voter, vote_term, transfer);
  }
}

void Raft::SendVoteRequest(MessageType type, NodeId to, Term vote_term, bool transfer) {
  Message m;
  m.type = type;
  m.to = to;
  m.term = vote_term;
  m.index = log_.LastIndex();
  m.log_term = log_.LastTerm();
  m.transfer = transfer;
  Send(std::move(m));
}

bool Raft::ShouldWithholdVote(const Message& m) const {
  // A vote started by TimeoutNow comes from a transfer the leader itself asked for (and it stopped
  // its lease reads first).
  if (m.transfer || config_.mutations.vote_while_leader_live) return false;
  // A vote for a term below ours elects nobody, nor does one in our term once we know its leader
  // or have already voted for the sender. Any other vote in our own term counts: another message
  // (the term-T+1 answer rejecting our own pre-vote, say) can move us to a term without a vote
  // request, while the leader we heard still holds its lease (sim seed 2122).
  if (m.term < term_ || (m.term == term_ && (leader_ != kNoNode || vote_ == m.from))) return false;
  if (role_ == Role::kLeader) return true;
  // raft/DESIGN.md §4: the leader lease assumes no voter helps elect a new leader within the
  // election floor after it heard from the current one.
  return ticks_since_leader_contact_ < config_.election_timeout_min_ticks ||
         now_ < hold_until_tick_;
}

// Split votes. Two survivors of a dead leader whose timers fire within a round trip of each other
// both start pre-campaigns; each grants the other's pre-vote, both become candidates, each votes
// for itself, and the election produces no leader until another timeout (plus back-off) passes:
// the slowest failovers the chaos harness measured. Refusing a pre-vote never affects safety, so
// the tie is broken here: a pre-candidate whose own pre-campaign started within the tie window
// refuses the pre-vote of a node with a higher id and an equally up-to-date log for the same
// term (and asks it again for its own pre-vote, see AskAgain). Outside the window it grants as
// usual, so a pre-candidate stuck without a quorum cannot block a peer that could win.
bool Raft::LosesPreVoteTie(const Message& m) const {
  const std::int64_t window = config_.election_tie_window_ticks;
  return role_ == Role::kPreCandidate && now_ - pre_campaign_tick_ < window &&
         m.term == term_.Next() && m.index == log_.LastIndex() && m.log_term == log_.LastTerm() &&
         m.from > id_;
}

// The other half: a node that has just granted a pre-vote lets that pre-candidate finish (its
// RequestVote follows within a round trip) instead of starting a competing campaign whose
// pre-vote the first one, still waiting for its answers, might grant.
bool Raft::DeferCampaignAfterGrant() const {
  return role_ == Role::kFollower &&
         now_ - pre_vote_granted_tick_ < config_.election_tie_window_ticks;
}

// We refused the pre-vote of a campaigning voter that has not answered our own request: ask it
// again. Our request most likely reached it while it still withheld votes (withheld requests get
// no answer, and we would wait a whole timeout for one), and now that it campaigns it answers:
// it grants a pre-candidate with the lower id or the more up-to-date log, and a candidate's
// RequestVote moves it to our term.
void Raft::AskAgain(NodeId voter) {
  if (votes_.contains(voter) || !IsVoter(conf_, voter)) return;
  if (role_ == Role::kPreCandidate) {
    SendVoteRequest(MessageType::kPreVote, voter, term_.Next(), false);
  } else if (role_ == Role::kCandidate) {
    SendVoteRequest(MessageType::kRequestVote, voter, term_, false);
  }
}

void Raft::HandleVoteRequest(const Message& m) {
  const bool pre = m.type == MessageType::kPreVote;
  const bool tie_lost = pre && LosesPreVoteTie(m);
  // Raft §5.2: at most one vote per term, first come first served. A pre-vote for a later term
  // promises nothing (but see LosesPreVoteTie).
  const bool can_vote =
      (vote_ == m.from || (vote_ == kNoNode && leader_ == kNoNode) || (pre && m.term > term_)) &&
      !tie_lost;
  // Raft §5.4.1: only for a candidate whose log is at least as up-to-date as ours.
  const bool log_ok =
      config_.mutations.no_election_restriction || log_.IsUpToDate(m.index, m.log_term);
  Message resp;
  resp.type = pre ? MessageType::kPreVoteResponse : MessageType::kRequestVoteResponse;
  resp.to = m.from;
  if (can_vote && log_ok) {
    resp.term = m.term;
    if (pre) {
      pre_vote_granted_tick_ = now_;
    } else {
      election_elapsed_ = 0;
      vote_ = m.from;
    }
    Log(LogLevel::kDebug, "granted {} to {} at term {}", MessageTypeName(m.type), m.from, m.term);
  } else {
    if (tie_lost) {
      Log(LogLevel::kInfo, "pre-vote tie with {} at term {}: the lower id campaigns first", m.from,
          m.term);
    }
    if (pre) AskAgain(m.from);
    resp.term = term_;
    resp.reject = true;
  }
  Send(std::move(resp));
}

StepResult Raft::HandleVoteResponse(const Message& m) {
  votes_.emplace(m.from, !m.reject);  // the first answer of each voter counts
  switch (TallyVotes(conf_.voters, votes_)) {
    case VoteOutcome::kWon:
      if (role_ == Role::kPreCandidate) {
        CampaignRound(MessageType::kRequestVote, false);
      } else {
        BecomeLeader();
      }
      break;
    case VoteOutcome::kLost:
      Log(LogLevel::kInfo, "lost the {} at term {}", RoleName(role_), m.term);
      BecomeFollower(term_, kNoNode);
      break;
    case VoteOutcome::kPending: break;
  }
  return StepResult::kOk;
}

bool Raft::Promotable() const { return IsVoter(conf_, id_); }

bool Raft::HasUnappliedConfChanges() const {
  if (log_.HasPendingSnapshot()) return true;
  LogIndex lo = applied_.Next();
  const LogIndex hi = log_.committed().Next();
  while (lo < hi) {
    std::vector<Entry> entries = log_.Slice(lo, hi, 1U << 20);
    for (const Entry& e : entries) {
      if (e.type == EntryType::kConfChange) return true;
    }
    lo = entries.back().index.Next();
  }
  return false;
}

void Raft::HeardFromLeader(NodeId leader) {
  if (leader_ == kNoNode) leader_ = leader;
  // A gap is latency only between two messages of the same leader in the same term. One that
  // spans a change of leader (the old one died, was paused or cut off, and an election ran) is
  // the outage the election handled; counting it raised a survivor's timeout right after a
  // failover and slowed the next one (chaos: a kill 330 ms after a pause-leader failover took
  // 592 ms). A gap as long as the timeout is an outage too, whoever sends next.
  if (last_leader_message_tick_ >= 0 && last_leader_from_ == leader && last_leader_term_ == term_) {
    const std::int64_t gap = now_ - last_leader_message_tick_;
    if (gap < timeout_base_) leader_gap_ticks_.Observe(gap, now_);
  }
  last_leader_message_tick_ = now_;
  last_leader_from_ = leader;
  last_leader_term_ = term_;
  ticks_since_leader_contact_ = 0;
  election_elapsed_ = 0;
  campaigned_without_leader_ = false;
}

// ---------------------------------------------------------------------------------------------
// Adaptive election timeout (raft/DESIGN.md §3): drawn from [T, T + jitter), floor <= T <= cap.

void Raft::RedrawElectionTimeout() {
  randomized_election_timeout_ = timeout_base_ + rng_.Uniform(config_.election_jitter_ticks);
}

void Raft::BackOffElectionTimeout() {
  const std::int64_t step = std::max<std::int64_t>(1, config_.election_timeout_min_ticks / 2);
  const std::int64_t raised = std::min(config_.max_election_timeout_ticks, timeout_base_ + step);
  if (raised != timeout_base_) {
    Log(LogLevel::kInfo, "election produced no leader: timeout base {} -> {}", timeout_base_,
        raised);
    timeout_base_ = raised;
    RedrawElectionTimeout();
  }
}

std::int64_t Raft::LatencyTargetBase() const {
  const std::int64_t gap = leader_gap_ticks_.Get(now_);
  const std::int64_t latency =
      std::max(round_trip_ticks_.Get(now_), persist_latency_ticks_.Get(now_));
  const std::int64_t target = std::max({config_.election_timeout_min_ticks, 2 * gap, 4 * latency});
  return std::min(target, config_.max_election_timeout_ticks);
}

void Raft::MaybeAdaptElectionTimeout() {
  const std::int64_t target = LatencyTargetBase();
  if (target > timeout_base_) {
    Log(LogLevel::kInfo, "high latency: timeout base {} -> {}", timeout_base_, target);
    timeout_base_ = target;
    RedrawElectionTimeout();
    return;
  }
  // Straight back to the target (the floor once the measured latency is normal again) once
  // leadership has been stable for one latency window. The target still holds every sample of the
  // last one to two windows, so a latency that persists keeps the base raised.
  if (timeout_base_ > target && stable_leadership_ticks_ >= LatencyWindowTicks(config_)) {
    Log(LogLevel::kInfo, "latency normal, leadership stable: timeout base {} -> {}", timeout_base_,
        target);
    timeout_base_ = target;
    RedrawElectionTimeout();
  }
}

void Raft::ObservePersistLatency(std::int64_t ticks) {
  // Not filtered: a disk slower than the timeout is exactly what must raise it (up to the cap).
  persist_latency_ticks_.Observe(ticks, now_);
  MaybeAdaptElectionTimeout();
}

// ---------------------------------------------------------------------------------------------
// Timing changes at run time (node.h UpdateTiming; raft/DESIGN.md §4 "Changing the floor").

epoch::Status Raft::UpdateTiming(const Timing& timing) {
  Config next = config_;
  next.SetTiming(timing);
  if (epoch::Status valid = next.Validate(); !valid.ok()) return valid;
  const std::int64_t old_floor = config_.election_timeout_min_ticks;
  if (timing.election_timeout_min_ticks < old_floor &&
      !config_.mutations.lower_floor_without_hold) {
    // Our answer to the last leader message carried the old floor, and that leader's lease may
    // count on it: keep withholding for the old floor after that contact.
    const std::int64_t last_contact = now_ - ticks_since_leader_contact_;
    hold_until_tick_ = std::max(hold_until_tick_, last_contact + old_floor);
  }
  config_ = next;
  timeout_base_ = std::clamp(timeout_base_, config_.election_timeout_min_ticks,
                             config_.max_election_timeout_ticks);
  RedrawElectionTimeout();
  Log(LogLevel::kInfo, "timing: heartbeat {} floor {} -> {} jitter {} cap {} drift {}",
      timing.heartbeat_ticks, old_floor, timing.election_timeout_min_ticks,
      timing.election_jitter_ticks, timing.max_election_timeout_ticks, timing.max_clock_drift);
  return epoch::Status::Ok();
}

}  // namespace epoch::raft
