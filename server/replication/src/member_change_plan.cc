#include "epoch/replication/member_change_plan.h"

#include <algorithm>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

// Started voters after the change: those of `voters` in `started`, plus `extra` when it started.
bool QuorumStarted(const MemberView& view, const std::vector<NodeId>& voters, std::uint64_t extra,
                   std::uint64_t removed) {
  std::size_t members = 0;
  std::size_t started = 0;
  for (NodeId v : voters) {
    if (v.value() == removed) continue;
    ++members;
    if (view.started.contains(v.value())) ++started;
  }
  if (extra != 0) {
    ++members;
    if (view.started.contains(extra)) ++started;
  }
  return started >= members / 2 + 1;
}

// etcd's isLearnerReady: the learner's match is at least the leader's commit index (the Raft
// core refuses the promotion otherwise, kLearnerNotCaughtUp; checked here for etcd's error).
bool LearnerInSync(const raft::NodeStatus& leader, std::uint64_t id) {
  for (const raft::PeerStatus& p : leader.progress) {
    if (p.id.value() == id) return p.match >= leader.commit;
  }
  return false;
}

Result<raft::ConfChange> PlanAdd(const v1::MemberChange& change, const MemberView& view,
                                 const raft::NodeStatus& leader, const MemberChangeRules& rules) {
  if (PeerUrlsInUse(view.table, change.peer_urls(), 0)) {
    return etcd_errors::kPeerUrlExist.ToStatus();
  }
  const NodeId id(change.id());
  if (change.is_learner()) {
    if (static_cast<int>(leader.conf.learners.size()) >= rules.max_learners) {
      return etcd_errors::kTooManyLearners.ToStatus();
    }
    return raft::ConfChange{raft::ConfChangeType::kAddLearner, id, {}};
  }
  if (rules.strict_reconfig_check && !QuorumStarted(view, leader.conf.voters, change.id(), 0)) {
    return etcd_errors::kMemberNotEnoughStarted.ToStatus();
  }
  return raft::ConfChange{raft::ConfChangeType::kAddVoter, id, {}};
}

}  // namespace

Result<raft::ConfChange> PlanMemberChange(const v1::MemberChange& change, const MemberView& view,
                                          const raft::NodeStatus& leader,
                                          const MemberChangeRules& rules) {
  EPOCH_RETURN_IF_ERROR(ValidateMemberChange(view.table, change));
  const NodeId id(change.id());
  switch (change.kind()) {
    case v1::MemberChange::ADD: return PlanAdd(change, view, leader, rules);
    case v1::MemberChange::UPDATE:
      if (PeerUrlsInUse(view.table, change.peer_urls(), change.id())) {
        return etcd_errors::kPeerUrlExist.ToStatus();
      }
      return raft::ConfChange{raft::ConfChangeType::kUpdateNode, id, {}};
    case v1::MemberChange::PROMOTE:
      if (rules.strict_reconfig_check && !QuorumStarted(view, leader.conf.voters, change.id(), 0)) {
        return etcd_errors::kMemberNotEnoughStarted.ToStatus();
      }
      if (!LearnerInSync(leader, change.id())) return etcd_errors::kLearnerNotReady.ToStatus();
      return raft::ConfChange{raft::ConfChangeType::kPromoteLearner, id, {}};
    case v1::MemberChange::REMOVE:
      if (rules.strict_reconfig_check && raft::IsVoter(leader.conf, id) &&
          !QuorumStarted(view, leader.conf.voters, 0, change.id())) {
        return etcd_errors::kMemberNotEnoughStarted.ToStatus();
      }
      return raft::ConfChange{raft::ConfChangeType::kRemoveNode, id, {}};
    default: break;
  }
  return Status::InvalidArgument("epoch: unknown member change");
}

}  // namespace epoch::server
