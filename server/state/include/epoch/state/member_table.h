// The member table: every member the cluster has had, with its peer URLs and whether it is a
// learner, replicated with the Raft configuration it mirrors.
//
// A membership change (InternalRequest.member_change) travels as the context of a kConfChange
// entry (raft/include/epoch/raft/conf_change.h), so the Raft core and the state machine apply it
// from the same entry. ApplyMemberChange accepts exactly the changes raft::ApplyConfChange
// accepts when the table's live members are the configuration's voters and learners — which
// holds from the seed on: the table starts as the initial cluster's voters (the bootstrap
// snapshot's configuration), and every change after applies to both or to neither. Removed
// members stay in the table, marked, so that their IDs are never reused.
//
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"

namespace epoch::server {

using MemberTablePtr = std::shared_ptr<const v1::StoredMemberTable>;

// The most peer URLs one member may have, and the longest.
inline constexpr int kMaxPeerUrls = 16;
inline constexpr std::size_t kMaxPeerUrlBytes = 256;

// The table of an initial cluster: `members` (id, name, peer URLs) as voters, sorted by id.
MemberTablePtr InitialMemberTable(std::vector<v1::ClusterMember> members);

// The entry of `id` (removed or not), or nullptr.
const v1::ClusterMember* FindTableMember(const v1::StoredMemberTable& table, std::uint64_t id);

// Whether a live member other than `except` has one of `urls` as a peer URL.
bool PeerUrlsInUse(const v1::StoredMemberTable& table,
                   const google::protobuf::RepeatedPtrField<std::string>& urls,
                   std::uint64_t except);

// Live voters and learners.
int CountLive(const v1::StoredMemberTable& table, bool learners);

// Whether `change` applies to `table` by raft::ApplyConfChange's rules, with etcd's error when
// it does not: adding a live member (member ID already exist), removing, updating or promoting a
// member that is not live (member not found), promoting a voter (can only promote a learner
// member), removing the last voter. The state machine applies a change exactly when this is OK.
Status MemberChangeApplies(const v1::StoredMemberTable& table, const v1::MemberChange& change);

// MemberChangeApplies, and peer URLs that are empty, too many or too long (given member URLs are
// invalid): what is checked before a change is proposed.
Status ValidateMemberChange(const v1::StoredMemberTable& table, const v1::MemberChange& change);

// `table` after `change` (which ValidateMemberChange accepted).
MemberTablePtr WithMemberChange(const v1::StoredMemberTable& table, const v1::MemberChange& change);

}  // namespace epoch::server
