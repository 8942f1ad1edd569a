#include "epoch/state/member_table.h"

#include <algorithm>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

bool Live(const v1::ClusterMember* m) { return m != nullptr && !m->removed(); }

Status ValidatePeerUrls(const google::protobuf::RepeatedPtrField<std::string>& urls) {
  if (urls.empty() || urls.size() > kMaxPeerUrls) {
    return etcd_errors::kMemberBadUrls.ToStatus();
  }
  for (const std::string& url : urls) {
    if (url.empty() || url.size() > kMaxPeerUrlBytes) {
      return etcd_errors::kMemberBadUrls.ToStatus();
    }
  }
  return Status::Ok();
}

void SortById(v1::StoredMemberTable* table) {
  auto* members = table->mutable_members();
  std::sort(members->begin(), members->end(),
            [](const v1::ClusterMember& a, const v1::ClusterMember& b) { return a.id() < b.id(); });
}

}  // namespace

MemberTablePtr InitialMemberTable(std::vector<v1::ClusterMember> members) {
  auto table = std::make_shared<v1::StoredMemberTable>();
  for (v1::ClusterMember& m : members) {
    m.set_is_learner(false);
    m.set_removed(false);
    *table->add_members() = std::move(m);
  }
  SortById(table.get());
  return table;
}

const v1::ClusterMember* FindTableMember(const v1::StoredMemberTable& table, std::uint64_t id) {
  for (const v1::ClusterMember& m : table.members()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

bool PeerUrlsInUse(const v1::StoredMemberTable& table,
                   const google::protobuf::RepeatedPtrField<std::string>& urls,
                   std::uint64_t except) {
  for (const v1::ClusterMember& m : table.members()) {
    if (m.removed() || m.id() == except) continue;
    for (const std::string& url : urls) {
      if (std::find(m.peer_urls().begin(), m.peer_urls().end(), url) != m.peer_urls().end()) {
        return true;
      }
    }
  }
  return false;
}

int CountLive(const v1::StoredMemberTable& table, bool learners) {
  return static_cast<int>(std::count_if(table.members().begin(), table.members().end(),
                                        [learners](const v1::ClusterMember& m) {
                                          return !m.removed() && m.is_learner() == learners;
                                        }));
}

Status ValidateMemberChange(const v1::StoredMemberTable& table, const v1::MemberChange& change) {
  EPOCH_RETURN_IF_ERROR(MemberChangeApplies(table, change));
  if (change.kind() == v1::MemberChange::ADD || change.kind() == v1::MemberChange::UPDATE) {
    return ValidatePeerUrls(change.peer_urls());
  }
  return Status::Ok();
}

Status MemberChangeApplies(const v1::StoredMemberTable& table, const v1::MemberChange& change) {
  if (change.id() == 0) return etcd_errors::kMemberNotFound.ToStatus();
  const v1::ClusterMember* member = FindTableMember(table, change.id());
  switch (change.kind()) {
    case v1::MemberChange::ADD:
      if (Live(member)) return etcd_errors::kMemberExist.ToStatus();
      return Status::Ok();
    case v1::MemberChange::UPDATE:
      if (!Live(member)) return etcd_errors::kMemberNotFound.ToStatus();
      return Status::Ok();
    case v1::MemberChange::PROMOTE:
      if (!Live(member)) return etcd_errors::kMemberNotFound.ToStatus();
      if (!member->is_learner()) return etcd_errors::kMemberNotLearner.ToStatus();
      return Status::Ok();
    case v1::MemberChange::REMOVE:
      if (!Live(member)) return etcd_errors::kMemberNotFound.ToStatus();
      if (!member->is_learner() && CountLive(table, false) == 1) {
        return etcd_errors::kMemberNotEnoughStarted.ToStatus("the last voter");
      }
      return Status::Ok();
    default: break;
  }
  return Status::InvalidArgument("epoch: unknown member change");
}

MemberTablePtr WithMemberChange(const v1::StoredMemberTable& table,
                                const v1::MemberChange& change) {
  auto out = std::make_shared<v1::StoredMemberTable>(table);
  v1::ClusterMember* member = nullptr;
  for (v1::ClusterMember& m : *out->mutable_members()) {
    if (m.id() == change.id()) member = &m;
  }
  switch (change.kind()) {
    case v1::MemberChange::ADD:
      if (member == nullptr) {
        member = out->add_members();
        member->set_id(change.id());
      }
      member->set_removed(false);
      member->set_is_learner(change.is_learner());
      *member->mutable_peer_urls() = change.peer_urls();
      SortById(out.get());
      break;
    case v1::MemberChange::UPDATE: *member->mutable_peer_urls() = change.peer_urls(); break;
    case v1::MemberChange::PROMOTE: member->set_is_learner(false); break;
    case v1::MemberChange::REMOVE:
      member->set_removed(true);
      member->set_is_learner(false);
      break;
    default: break;
  }
  return out;
}

}  // namespace epoch::server
