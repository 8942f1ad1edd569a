// PlanMemberChange: the leader's checks before it proposes a membership change, and the Raft
// configuration change that carries it (etcd's mayAddMember / mayRemoveMember /
// mayPromoteMember, server.go, v3.4).
//
// The checks here depend on the leader's view (who has started, the learner's progress); the
// rules that decide whether the change applies once committed are MemberChangeApplies
// (epoch/state/member_table.h), the same on every member.
//
// Who calls it: the driver, on its strand, through DriverHooks::member_change. Pure function.
#pragma once

#include <cstdint>
#include <set>

#include "epoch/raft/conf_change.h"
#include "epoch/raft/node.h"
#include "epoch/state/member_table.h"
#include "epoch/status.h"

namespace epoch::server {

struct MemberChangeRules {
  // --strict-reconfig-check: refuse a change after which fewer than a quorum of the voters have
  // started (published their attributes), as etcd does.
  bool strict_reconfig_check = true;
  // etcd's maxLearners: at most this many learners at once.
  int max_learners = 1;
};

// What the plan reads: the applied member table and the members that have started.
struct MemberView {
  const v1::StoredMemberTable& table;
  const std::set<std::uint64_t>& started;
};

// The configuration change for `change`, or etcd's error: the change does not apply
// (ValidateMemberChange), peer URLs already in use, too many learners, a learner not in sync
// with the leader, or not enough started members under strict_reconfig_check.
[[nodiscard]] Result<raft::ConfChange> PlanMemberChange(const v1::MemberChange& change,
                                                        const MemberView& view,
                                                        const raft::NodeStatus& leader,
                                                        const MemberChangeRules& rules);

}  // namespace epoch::server
