// Linearizable reads (raft/DESIGN.md §4): ReadIndex (dissertation §6.4), leader lease (§6.4.1).
#include <algorithm>

#include "quorum.h"
#include "raft.h"

namespace epoch::raft {

bool Raft::CommittedInCurrentTerm() const { return log_.TermAt(log_.committed()) == term_; }

bool Raft::LeaseValid() const {
  // The lease ends for good once a TimeoutNow may be in flight: its target's election bypasses
  // vote withholding, the very thing the lease relies on. It is also paused during a transfer.
  return role_ == Role::kLeader && CommittedInCurrentTerm() && transfer_target_ == kNoNode &&
         !timeout_now_sent_ && now_ < lease_expiry_tick_;
}

void Raft::AckRound(Progress& pr, std::uint64_t round) {
  if (role_ != Role::kLeader || round <= pr.acked_round) return;
  pr.acked_round = round;
  if (std::optional<std::int64_t> sent = rounds_.SentTick(round)) {
    const std::int64_t rtt = now_ - *sent;
    if (rtt < timeout_base_) {
      round_trip_ticks_.Observe(rtt, now_);
      MaybeAdaptElectionTimeout();
    }
  }
  UpdateQuorumRound();
}

void Raft::UpdateQuorumRound() {
  if (role_ != Role::kLeader || conf_.voters.empty()) return;
  std::vector<std::uint64_t> acked;
  for (NodeId voter : conf_.voters) {
    auto it = progress_.find(voter);
    acked.push_back(it == progress_.end() ? 0 : it->second.acked_round);
  }
  const std::uint64_t round = MajorityValue(acked);
  if (round <= quorum_acked_round_) return;
  quorum_acked_round_ = round;
  // Lease start = SEND time of the round a quorum acknowledged: each of those voters heard from
  // us no earlier than that, so none helps elect another leader for a floor of its own ticks.
  if (std::optional<std::int64_t> sent = rounds_.SentTick(round)) {
    const std::int64_t lease = config_.LeaseTicksFor(QuorumFloor(round));
    lease_expiry_tick_ = std::max(lease_expiry_tick_, *sent + lease);
  }
  rounds_.ForgetBefore(round);
  for (const PendingRead& read : read_only_.Release(round)) {
    RespondRead(read.context, read.from, read.index, /*via_lease=*/false);
  }
}

// The smallest election floor among the voters that acknowledged `round` (a quorum, ourselves
// included), as each last reported it. Every one of them withholds its vote for at least that
// long after the latest message it answered (UpdateTiming holds a lowered floor's old value for
// the contact it was answered with), so a lease derived from it holds while members change their
// floors one by one.
std::int64_t Raft::QuorumFloor(std::uint64_t round) const {
  std::int64_t floor = config_.election_timeout_min_ticks;
  if (config_.mutations.lease_from_own_floor) return floor;
  for (NodeId voter : conf_.voters) {
    auto it = progress_.find(voter);
    if (voter == id_ || it == progress_.end() || it->second.acked_round < round) continue;
    floor = std::min(floor, it->second.reported_floor);
  }
  return floor;
}

ReadIndexOutcome Raft::ReadIndex(std::uint64_t context) {
  if (role_ == Role::kLeader) return ServeRead(context, id_);
  if (leader_ == kNoNode) return ReadIndexOutcome::kNoLeader;
  Message m;
  m.type = MessageType::kReadIndex;
  m.to = leader_;
  m.context = context;
  Send(std::move(m));
  return ReadIndexOutcome::kForwarded;
}

ReadIndexOutcome Raft::ServeRead(std::uint64_t context, NodeId from) {
  if (!CommittedInCurrentTerm()) {
    // Our commit index may be behind the previous leader's until our no-op commits (§6.4 step 1).
    read_only_.AddWaitingCommit(context, from);
    return ReadIndexOutcome::kPending;
  }
  const LogIndex index = log_.committed();
  if (conf_.voters.size() == 1 || config_.mutations.read_index_without_quorum) {
    RespondRead(context, from, index, /*via_lease=*/false);
    return ReadIndexOutcome::kConfirmed;
  }
  if (LeaseValid()) {
    RespondRead(context, from, index, /*via_lease=*/true);
    return ReadIndexOutcome::kLease;
  }
  // Confirmed by the first round sent after now; every request until then shares it.
  read_only_.Add(PendingRead{context, from, index, rounds_.last() + 1});
  return ReadIndexOutcome::kPending;
}

void Raft::RespondRead(std::uint64_t context, NodeId from, LogIndex index, bool via_lease) {
  if (from == id_) {
    read_states_.push_back(ReadState{context, index, via_lease});
    return;
  }
  Message m;
  m.type = MessageType::kReadIndexResponse;
  m.to = from;
  m.index = index;
  m.context = context;
  m.via_lease = via_lease;
  Send(std::move(m));
}

void Raft::ReleaseReadsAwaitingCommit() {
  if (!CommittedInCurrentTerm()) return;
  for (const auto& [context, from] : read_only_.TakeWaitingCommit()) ServeRead(context, from);
}

bool Raft::HasReadRoundToFlush() const {
  return role_ == Role::kLeader && read_only_.HasUnsent(rounds_.last());
}

void Raft::FlushReadRound() {
  if (HasReadRoundToFlush()) BroadcastHeartbeat();
}

}  // namespace epoch::raft
