#include "peer_membership.h"

#include <spdlog/spdlog.h>

#include <set>

#include "epoch/raft/conf_change.h"
#include "epoch/replication/member_change_plan.h"

namespace epoch::server {

MemberTablePtr InitialMemberTableOf(const NodeConfig& config) {
  std::vector<v1::ClusterMember> members;
  for (const MemberInfo& m : config.members) {
    v1::ClusterMember& member = members.emplace_back();
    member.set_id(m.id.value());
    member.set_name(m.name);
    member.add_peer_urls("http://" + m.peer.ToString());
  }
  return InitialMemberTable(std::move(members));
}

raft::ConfState ConfStateOf(const v1::StoredMemberTable& table) {
  raft::ConfState conf;
  for (const v1::ClusterMember& m : table.members()) {
    if (m.removed()) continue;
    (m.is_learner() ? conf.learners : conf.voters).push_back(NodeId(m.id()));
  }
  return conf;  // sorted: the table is
}

Result<raft::ConfChange> PlanChange(const NodeConfig& config, const KvStore& store,
                                    const v1::InternalRequest& request,
                                    const raft::NodeStatus& leader) {
  MemberTablePtr table = store.MemberTable();
  std::set<std::uint64_t> started;
  for (const PublishedMember& p : *store.Members()) started.insert(p.id);
  MemberChangeRules rules;
  rules.strict_reconfig_check = config.strict_reconfig_check;
  return PlanMemberChange(request.member_change(), MemberView{*table, started}, leader, rules);
}

raft::ConfState PeersOf(const raft::ConfState& conf, const v1::StoredMemberTable& table) {
  std::set<NodeId> removed;
  std::set<NodeId> others;
  for (const v1::ClusterMember& m : table.members()) {
    (m.removed() ? removed : others).insert(NodeId(m.id()));
  }
  raft::ConfState peers;
  for (NodeId v : conf.voters) {
    if (!removed.contains(v)) peers.voters.push_back(v);
  }
  others.insert(conf.learners.begin(), conf.learners.end());
  for (NodeId id : others) {
    if (!removed.contains(id) && !raft::IsVoter(peers, id)) peers.learners.push_back(id);
  }
  return peers;  // sorted: conf and the sets are
}

void PeerMembership::Start() {
  {
    std::lock_guard lock(mu_);
    for (const MemberInfo& m : config_.members) {
      if (m.id != config_.self_id()) Dial(m.id, config_.PeerDialAddress(m));
    }
  }
  MemberTablePtr table = store_.MemberTable();
  if (table->members_size() > 0) Apply(ConfStateOf(*table));
}

void PeerMembership::Apply(const raft::ConfState& conf) {
  MemberTablePtr table = store_.MemberTable();
  const raft::ConfState peers = PeersOf(conf, *table);
  gate_.SetMembers(peers);
  std::lock_guard lock(mu_);
  for (const v1::ClusterMember& m : table->members()) {
    const NodeId id(m.id());
    if (id == config_.self_id()) {
      if (m.removed()) MarkRemovedLocked();
      continue;
    }
    if (!raft::IsVoter(peers, id) && !raft::IsLearner(peers, id)) {
      if (dialled_.erase(id) > 0) {
        spdlog::info("name={} node={:x} member={:x} left the configuration: disconnected",
                     config_.name, config_.self_id(), m.id());
        transport_.RemovePeer(id);
      }
      continue;
    }
    const MemberInfo* initial = config_.FindMember(id);
    if (initial != nullptr && config_.peer_dial_override.contains(id)) continue;
    if (m.peer_urls().empty()) continue;
    Result<HostPort> address = ParseHostPort(m.peer_urls(0));
    if (!address.ok()) {
      spdlog::warn("name={} member {:x} has an unusable peer URL '{}': not dialled", config_.name,
                   m.id(), m.peer_urls(0));
      continue;
    }
    Dial(id, *address);
  }
}

void PeerMembership::MarkRemoved() {
  std::lock_guard lock(mu_);
  MarkRemovedLocked();
}

void PeerMembership::MarkRemovedLocked() {
  if (removed_) return;
  removed_ = true;
  if (on_removed_) on_removed_();
}

std::vector<std::pair<NodeId, HostPort>> PeerMembership::Dialled() const {
  std::lock_guard lock(mu_);
  return {dialled_.begin(), dialled_.end()};
}

void PeerMembership::Dial(NodeId id, const HostPort& address) {
  auto it = dialled_.find(id);
  if (it != dialled_.end() && it->second == address) return;
  dialled_[id] = address;
  transport_.SetPeer(id, {address.host, address.port});
}

}  // namespace epoch::server
