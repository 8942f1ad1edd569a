// Proposals, membership changes one server at a time (dissertation §4.1–4.3) and leadership
// transfer (§3.10).
#include <algorithm>
#include <string_view>

#include "raft.h"

namespace epoch::raft {
namespace {

std::string_view ConfChangeName(ConfChangeType type) {
  switch (type) {
    case ConfChangeType::kAddLearner: return "add-learner";
    case ConfChangeType::kPromoteLearner: return "promote-learner";
    case ConfChangeType::kRemoveNode: return "remove-member";
    case ConfChangeType::kAddVoter: return "add-voter";
    case ConfChangeType::kUpdateNode: return "update-member";
  }
  return "unknown";
}

}  // namespace

ProposeResult Raft::Propose(std::vector<std::string> commands) {
  ProposeResult result;
  result.leader_hint = leader_;
  if (role_ != Role::kLeader) {
    result.error = ProposeError::kNotLeader;
    return result;
  }
  if (transfer_target_ != kNoNode) {
    result.error = ProposeError::kTransferInProgress;
    return result;
  }
  if (commands.empty()) {
    result.error = ProposeError::kEmptyBatch;
    return result;
  }
  std::uint64_t bytes = 0;
  for (const std::string& c : commands) bytes += c.size();
  if (uncommitted_bytes_ > 0 && uncommitted_bytes_ + bytes > config_.max_uncommitted_bytes) {
    result.error = ProposeError::kUncommittedLimit;
    return result;
  }
  std::vector<Entry> entries;
  entries.reserve(commands.size());
  for (std::string& c : commands)
    entries.push_back(Entry{{}, {}, EntryType::kNormal, std::move(c)});
  result.term = term_;
  result.first_index = log_.LastIndex().Next();
  AppendAsLeader(std::move(entries));
  result.last_index = log_.LastIndex();
  BroadcastAppend(false);
  return result;
}

ProposeResult Raft::ProposeConfChange(const ConfChange& change) {
  ProposeResult result;
  result.leader_hint = leader_;
  if (role_ != Role::kLeader) {
    result.error = ProposeError::kNotLeader;
    return result;
  }
  if (transfer_target_ != kNoNode) {
    result.error = ProposeError::kTransferInProgress;
    return result;
  }
  // One change at a time, and only after an entry of this term committed (the fix to the
  // single-server change bug, Ongaro 2015): the previous change is then applied everywhere that
  // counts.
  if (pending_conf_index_ > applied_ || !CommittedInCurrentTerm()) {
    result.error = ProposeError::kConfChangePending;
    return result;
  }
  if (!ApplyConfChange(conf_, change).ok()) {
    result.error = ProposeError::kInvalidConfChange;
    return result;
  }
  if (change.type == ConfChangeType::kPromoteLearner) {
    auto it = progress_.find(change.node);
    if (it == progress_.end() || it->second.match < log_.committed()) {
      result.error = ProposeError::kLearnerNotCaughtUp;
      return result;
    }
  }
  result.term = term_;
  result.first_index = log_.LastIndex().Next();
  AppendAsLeader({Entry{{}, {}, EntryType::kConfChange, EncodeConfChange(change)}});
  result.last_index = log_.LastIndex();
  pending_conf_index_ = result.last_index;
  BroadcastAppend(false);
  return result;
}

void Raft::ApplyConfChangeEntry(const Entry& entry) {
  if (entry.index <= conf_index_) return;  // a snapshot installed meanwhile already includes it
  const std::optional<ConfChange> change = DecodeConfChange(entry.data);
  if (!change) {
    Log(LogLevel::kError, "undecodable conf change at {}: ignored", entry.index);
    return;
  }
  Result<ConfState> next = ApplyConfChange(conf_, *change);
  if (!next.ok()) {
    // Deterministic on every node: the same committed entry is skipped everywhere.
    Log(LogLevel::kWarning, "conf change at {} ignored: {}", entry.index, next.status().ToString());
    return;
  }
  conf_ = std::move(*next);
  conf_index_ = entry.index;
  conf_changed_ = true;
  Log(LogLevel::kInfo, "applied conf change {} member={:x} index={} voters={} learners={}",
      ConfChangeName(change->type), change->node.value(), entry.index, conf_.voters.size(),
      conf_.learners.size());
  if (role_ != Role::kLeader) return;
  const NodeId node = change->node;
  switch (change->type) {
    case ConfChangeType::kAddLearner:
    case ConfChangeType::kAddVoter: {
      auto [it, inserted] = progress_.emplace(
          node,
          Progress(log_.LastIndex().Next(), config_.max_inflight_msgs, config_.max_inflight_bytes));
      it->second.learner = change->type == ConfChangeType::kAddLearner;
      MaybeSendAppend(node, it->second, true);
      break;
    }
    case ConfChangeType::kUpdateNode: return;
    case ConfChangeType::kPromoteLearner:
      if (auto it = progress_.find(node); it != progress_.end()) it->second.learner = false;
      break;
    case ConfChangeType::kRemoveNode:
      if (node == transfer_target_) AbortTransfer();
      if (node == id_) {
        StepDownAfterRemoval();
        return;
      }
      progress_.erase(node);
      break;
  }
  // The quorum changed: commit and read confirmation may advance.
  if (MaybeCommit()) AfterCommitAdvanced();
  UpdateQuorumRound();
}

void Raft::StepDownAfterRemoval() {
  // Dissertation §4.2.2: a removed leader steps down once the change is committed. Hand over to
  // the most up-to-date remaining voter at once rather than waiting for an election timeout —
  // also when it has not acknowledged the newest entries (under a write load it rarely has): the
  // election rules still decide, so a target missing an entry another voter holds loses the
  // election it starts, and the others elect as they would have without the hand-over.
  NodeId best = kNoNode;
  LogIndex best_match;
  for (NodeId voter : conf_.voters) {
    auto it = progress_.find(voter);
    if (it != progress_.end() && (best == kNoNode || it->second.match > best_match)) {
      best = voter;
      best_match = it->second.match;
    }
  }
  if (best != kNoNode) SendTimeoutNow(best);
  Log(LogLevel::kInfo, "removed from the configuration: stepping down");
  BecomeFollower(term_, kNoNode);
}

TransferOutcome Raft::TransferLeadership(NodeId target) {
  if (role_ != Role::kLeader) return TransferOutcome::kNotLeader;
  if (target == id_) return TransferOutcome::kTargetIsSelf;
  if (!IsVoter(conf_, target)) return TransferOutcome::kTargetNotVoter;
  if (target == transfer_target_) return TransferOutcome::kAlreadyInProgress;
  Log(LogLevel::kInfo, "transferring leadership to {}", target);
  // From here on LeaseValid() is false: lease reads stop before TimeoutNow can be sent.
  transfer_target_ = target;
  transfer_elapsed_ = 0;
  auto it = progress_.find(target);
  RAFT_ASSERT(it != progress_.end(), "voter {} has no progress", target);
  Progress& pr = it->second;
  if (pr.match == log_.LastIndex()) {
    SendTimeoutNow(target);
  } else {
    MaybeSendAppend(target, pr, true);  // TimeoutNow follows once it caught up
  }
  return TransferOutcome::kStarted;
}

void Raft::SendTimeoutNow(NodeId target) {
  timeout_now_sent_ = true;
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.to = target;
  Send(std::move(m));
}

void Raft::AbortTransfer() {
  transfer_target_ = kNoNode;
  transfer_elapsed_ = 0;
}

void Raft::ReportSnapshot(NodeId peer, bool ok) {
  if (role_ != Role::kLeader) return;
  auto it = progress_.find(peer);
  if (it == progress_.end() || it->second.state != ProgressState::kSnapshot) return;
  Progress& pr = it->second;
  if (!ok) pr.pending_snapshot = LogIndex(0);
  pr.BecomeProbe();
  // Wait for the follower's answer (or the next heartbeat answer) before probing.
  pr.probe_sent = true;
}

void Raft::ReportUnreachable(NodeId peer) {
  if (role_ != Role::kLeader) return;
  auto it = progress_.find(peer);
  if (it != progress_.end() && it->second.state == ProgressState::kReplicate) {
    it->second.BecomeProbe();
  }
}

}  // namespace epoch::raft
