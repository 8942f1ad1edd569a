// The nemesis: injects one fault at a time at random moments of the fault phase, chosen by the
// run's fault weights, and schedules its healing. At most one partition and one link
// degradation are active at once (a new one replaces the old); crashes, clock changes, disk
// faults and leadership transfers overlap freely with them.
#include <fmt/format.h>

#include <algorithm>

#include "simulation.h"

namespace epoch::sim {

std::uint64_t Simulation::AddHeal(std::function<void()> heal) {
  std::uint64_t id = next_heal_id_++;
  heals_[id] = std::move(heal);
  return id;
}

void Simulation::InjectFault() {
  if (!faults_active_) return;
  Event next;
  next.time = now_ + nemesis_rng_.Range(swarm_.fault_gap_min_us, swarm_.fault_gap_max_us);
  next.kind = EventKind::kInjectFault;
  Push(std::move(next));

  std::uint64_t total = 0;
  for (std::uint32_t w : swarm_.weights) total += w;
  if (total == 0) return;
  std::uint64_t pick = nemesis_rng_.Below(total);
  int k = 0;
  while (pick >= swarm_.weights[static_cast<std::size_t>(k)]) {
    pick -= swarm_.weights[static_cast<std::size_t>(k)];
    ++k;
  }
  const auto kind = static_cast<FaultKind>(k);
  switch (kind) {
    case FaultKind::kDrop:
    case FaultKind::kDelay:
    case FaultKind::kDuplicate:
    case FaultKind::kReorder: InjectLinkFault(kind); break;
    case FaultKind::kPartitionFull:
    case FaultKind::kPartitionAsymmetric:
    case FaultKind::kPartitionLeaderIsolated:
    case FaultKind::kPartitionMajoritiesRing: InjectPartition(kind); break;
    case FaultKind::kCrash: InjectCrash(); break;
    case FaultKind::kClockDrift:
      InjectClockDrift(static_cast<int>(nemesis_rng_.Below(nodes_.size())));
      break;
    case FaultKind::kSlowDisk:
    case FaultKind::kStalledLeaderDisk: InjectDiskFault(kind); break;
    case FaultKind::kLeaderTransfer: InjectTransfer(); break;
    case FaultKind::kMembershipChange: InjectMembershipChange(); break;
    case FaultKind::kTimingChange: InjectTimingChange(); break;
  }
}

std::vector<int> Simulation::ShuffledMembers() {
  std::vector<int> perm = members_;
  for (std::size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[nemesis_rng_.Below(i)]);
  return perm;
}

void Simulation::InjectPartition(FaultKind kind) {
  if (partition_heal_ != 0) {  // replace the active partition
    heals_.erase(partition_heal_);
    network_->HealCuts();
    partition_heal_ = 0;
  }
  std::vector<int> perm = ShuffledMembers();
  if (perm.size() < 2) return;
  int leader = LeaderIndex();
  if (leader < 0 || std::find(perm.begin(), perm.end(), leader) == perm.end()) leader = perm[0];
  const std::string what = CutPartition(kind, perm, leader);
  if (what.empty()) return;
  ++faults_[static_cast<std::size_t>(kind)];
  Trace(what);
  partition_heal_ = AddHeal([this] {
    network_->HealCuts();
    partition_heal_ = 0;
    Trace("partition healed");
  });
  Event heal;
  heal.time = now_ + nemesis_rng_.Range(100'000, swarm_.fault_duration_max_us);
  heal.kind = EventKind::kHeal;
  heal.tag = partition_heal_;
  Push(std::move(heal));
}

// Cuts the links of one partition shape among the members `perm` (shuffled); returns its
// description.
std::string Simulation::CutPartition(FaultKind kind, std::vector<int>& perm, int leader) {
  const int n = static_cast<int>(perm.size());
  std::string what;
  switch (kind) {
    case FaultKind::kPartitionFull: {
      // A minority (with the leader half of the time) cut from the rest in both directions.
      if (nemesis_rng_.Chance(0.5)) {
        std::swap(*std::find(perm.begin(), perm.end(), leader), perm[0]);
      }
      auto k = static_cast<std::size_t>(nemesis_rng_.Range(1, std::max(1, (n - 1) / 2)));
      std::vector<int> minority(perm.begin(), perm.begin() + static_cast<std::ptrdiff_t>(k));
      std::vector<int> rest(perm.begin() + static_cast<std::ptrdiff_t>(k), perm.end());
      network_->CutBetween(minority, rest);
      bool clients_too = nemesis_rng_.Chance(0.5);
      if (clients_too) {
        for (int x : minority) network_->SetClientReachable(x, false);
      }
      what = fmt::format("partition: {} nodes (first {}) cut from the rest{}", k, minority[0] + 1,
                         clients_too ? ", clients too" : "");
      break;
    }
    case FaultKind::kPartitionAsymmetric: {
      const int f = perm[0] == leader ? perm[1] : perm[0];
      switch (nemesis_rng_.Below(4)) {
        case 0:  // the leader's messages to its followers are lost, not the replies
          for (int j : perm) {
            if (j != leader) network_->link(leader, j).cut = true;
          }
          what = fmt::format("asymmetric: leader {} -> all followers cut", leader + 1);
          break;
        case 1:  // one follower stops hearing the leader but still reaches it
          network_->link(leader, f).cut = true;
          what = fmt::format("asymmetric: leader {} -> node {} cut", leader + 1, f + 1);
          break;
        case 2:  // the leader and one follower lose each other, both still reach the rest
          network_->link(leader, f).cut = true;
          network_->link(f, leader).cut = true;
          what = fmt::format("non-transitive: leader {} <-> node {} cut, both reach the rest",
                             leader + 1, f + 1);
          break;
        default:  // one random directed link
          network_->link(perm[0], perm[1]).cut = true;
          what = fmt::format("asymmetric: node {} -> node {} cut", perm[0] + 1, perm[1] + 1);
          break;
      }
      break;
    }
    case FaultKind::kPartitionLeaderIsolated: {
      std::vector<int> rest;
      for (int j : perm) {
        if (j != leader) rest.push_back(j);
      }
      network_->CutBetween({leader}, rest);
      what = fmt::format("leader {} isolated from its followers, reachable by clients", leader + 1);
      break;
    }
    case FaultKind::kPartitionMajoritiesRing: {
      // 4-5 members: each keeps its two ring neighbours (a majority with itself), no two the
      // same majority. 3 members: a bridge: perm[0] sees both, the others not each other.
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          int d = std::abs(a - b);
          d = std::min(d, n - d);
          bool cut = n >= 4 ? d >= 2 : (a != 0 && b != 0 && a != b);
          if (cut) network_->link(perm[a], perm[b]).cut = true;
        }
      }
      what = "majorities ring";
      break;
    }
    default: return {};
  }
  return what;
}

void Simulation::InjectLinkFault(FaultKind kind) {
  if (link_heal_ != 0) {  // replace the active degradation
    auto it = heals_.find(link_heal_);
    if (it != heals_.end()) {
      auto heal = std::move(it->second);
      heals_.erase(it);
      heal();
    }
  }
  const bool all = nemesis_rng_.Chance(0.3);
  std::vector<std::pair<int, int>> links;
  for (int a : members_) {
    for (int b : members_) {
      if (a != b && (all || nemesis_rng_.Chance(0.4))) links.emplace_back(a, b);
    }
  }
  if (links.empty()) return;
  const double drop = 0.1 + nemesis_rng_.Unit() * 0.4;
  const double dup = 0.1 + nemesis_rng_.Unit() * 0.4;
  const std::int64_t delay = nemesis_rng_.Range(5'000, 60'000);
  const std::int64_t jitter = nemesis_rng_.Range(10'000, 80'000);
  for (auto [a, b] : links) {
    LinkState& l = network_->link(a, b);
    switch (kind) {
      case FaultKind::kDrop: l.drop = drop; break;
      case FaultKind::kDelay:
        l.delay_min_us += delay;
        l.delay_max_us += delay;
        break;
      case FaultKind::kDuplicate: l.duplicate = dup; break;
      case FaultKind::kReorder: l.delay_max_us = l.delay_min_us + jitter; break;
      default: return;
    }
  }
  ++faults_[static_cast<std::size_t>(kind)];
  Trace(fmt::format("{} on {} links", FaultKindName(kind), links.size()));
  link_heal_ = AddHeal([this, links] {
    for (auto [a, b] : links) {
      LinkState& l = network_->link(a, b);
      const bool cut = l.cut;
      l = network_->base();
      l.cut = cut;
    }
    link_heal_ = 0;
  });
  Event heal;
  heal.time = now_ + nemesis_rng_.Range(50'000, swarm_.fault_duration_max_us);
  heal.kind = EventKind::kHeal;
  heal.tag = link_heal_;
  Push(std::move(heal));
}

void Simulation::InjectCrash() {
  std::vector<int> up = UpNodes();
  if (up.empty()) return;
  int leader = LeaderIndex();
  int victim =
      (leader >= 0 && nemesis_rng_.Chance(0.5)) ? leader : up[nemesis_rng_.Below(up.size())];
  nodes_[victim]->Crash();
  ++faults_[static_cast<std::size_t>(FaultKind::kCrash)];
  Trace(fmt::format("crash node {}{}", victim + 1, victim == leader ? " (leader)" : ""));
  Event restart;
  restart.time = now_ + nemesis_rng_.Range(10'000, 1'500'000);
  restart.kind = EventKind::kRestart;
  restart.target = victim;
  Push(std::move(restart));
}

void Simulation::InjectClockDrift(int node) {
  double rate = DrawClockRate();
  nodes_[node]->tick_period_us =
      static_cast<std::int64_t>(static_cast<double>(options_.tick_us) / rate);
  ++faults_[static_cast<std::size_t>(FaultKind::kClockDrift)];
  Trace(fmt::format("node {} clock rate {:.3f}", node + 1, rate));
}

void Simulation::InjectDiskFault(FaultKind kind) {
  const int leader = LeaderIndex();
  const std::int64_t duration = nemesis_rng_.Range(100'000, swarm_.fault_duration_max_us);
  if (kind == FaultKind::kStalledLeaderDisk) {
    if (leader < 0) return;
    nodes_[leader]->disk.stalled_until_us = now_ + duration;
    Trace(fmt::format("leader {} disk stalled for {} ms", leader + 1, duration / 1000));
  } else {
    std::vector<int> followers;
    for (int i : UpNodes()) {
      if (i != leader) followers.push_back(i);
    }
    if (followers.empty()) return;
    int f = followers[nemesis_rng_.Below(followers.size())];
    nodes_[f]->disk.slow_extra_us = nemesis_rng_.Range(5'000, 100'000);
    Trace(fmt::format("node {} disk slow (+{} us)", f + 1, nodes_[f]->disk.slow_extra_us));
    std::uint64_t id = AddHeal([this, f] { nodes_[f]->disk.slow_extra_us = 0; });
    Event heal;
    heal.time = now_ + duration;
    heal.kind = EventKind::kHeal;
    heal.tag = id;
    Push(std::move(heal));
  }
  ++faults_[static_cast<std::size_t>(kind)];
}

void Simulation::InjectTransfer() {
  const int leader = LeaderIndex();
  if (leader < 0) return;
  std::vector<NodeId> others;
  for (NodeId v : nodes_[leader]->core()->conf_state().voters) {
    if (v != nodes_[leader]->id()) others.push_back(v);
  }
  if (others.empty()) return;
  NodeId target = others[nemesis_rng_.Below(others.size())];
  ++faults_[static_cast<std::size_t>(FaultKind::kLeaderTransfer)];
  Trace(fmt::format("transfer leadership {} -> {}", leader + 1, target));
  nodes_[leader]->TransferLeadership(target);
}

// One step of a replacement cycle: remove a voter (the leader itself a third of the time), add a
// fresh node as a learner, promote it once it caught up. Ids are never reused.
void Simulation::InjectMembershipChange() {
  const int leader = LeaderIndex();
  if (leader < 0) return;
  const raft::ConfState& conf = nodes_[leader]->core()->conf_state();
  raft::ConfChange change;
  int joining = -1;
  if (!conf.learners.empty()) {
    change = {raft::ConfChangeType::kPromoteLearner, conf.learners.front()};
  } else if (conf.voters.size() >= static_cast<std::size_t>(options_.nodes)) {
    NodeId victim = nemesis_rng_.Chance(1.0 / 3.0)
                        ? nodes_[leader]->id()
                        : conf.voters[nemesis_rng_.Below(conf.voters.size())];
    change = {raft::ConfChangeType::kRemoveNode, victim};
  } else if (next_spare_ < slots_) {
    joining = next_spare_;
    change = {raft::ConfChangeType::kAddLearner, nodes_[joining]->id()};
  } else {
    return;
  }
  raft::ProposeResult r = nodes_[leader]->ProposeConfChange(change);
  static constexpr const char* kVerb[] = {"?", "add learner", "promote", "remove"};
  Trace(fmt::format("leader {} proposes: {} node {}: {}", leader + 1,
                    kVerb[static_cast<int>(change.type)], change.node,
                    raft::ProposeErrorName(r.error)));
  if (!r.ok()) return;
  ++faults_[static_cast<std::size_t>(FaultKind::kMembershipChange)];
  if (joining >= 0) {
    ++next_spare_;
    StartNode(joining);
  }
}

// A cluster timing change as the server rolls one out: every member adopts it when it applies the
// change, each at its own moment and in no particular order (the leader first or last), crashed
// members when they restart. The floor moves between 9 and 30 ticks; the heartbeat stays at or
// below a third of it.
void Simulation::InjectTimingChange() {
  static constexpr std::int64_t kFloors[] = {9, 12, 15, 20, 30};
  raft::Timing timing = NodeConfig(0).timing();
  timing.election_timeout_min_ticks = kFloors[nemesis_rng_.Below(5)];
  timing.heartbeat_ticks = std::min<std::int64_t>(5, timing.election_timeout_min_ticks / 3);
  timing.election_jitter_ticks = timing.election_timeout_min_ticks;
  timing.max_election_timeout_ticks = 4 * timing.election_timeout_min_ticks;
  const auto change = static_cast<std::uint64_t>(timing_changes_.size());
  timing_changes_.push_back(timing);
  ++faults_[static_cast<std::size_t>(FaultKind::kTimingChange)];
  Trace(fmt::format("timing change {}: floor {} heartbeat {}", change,
                    timing.election_timeout_min_ticks, timing.heartbeat_ticks));
  const std::int64_t spread = 3 * timing.election_timeout_min_ticks * options_.tick_us;
  for (int i = 0; i < slots_; ++i) {
    Event apply;
    apply.time = now_ + (nemesis_rng_.Chance(0.25) ? 0 : nemesis_rng_.Range(0, spread));
    apply.kind = EventKind::kTimingApply;
    apply.target = i;
    apply.tag = change;
    Push(std::move(apply));
  }
}

void Simulation::HealEverything() {
  faults_active_ = false;
  heals_.clear();
  partition_heal_ = 0;
  link_heal_ = 0;
  network_->HealAll();
  for (auto& n : nodes_) {
    n->RecoverDisk();
    if (!n->up() && started_[n->index()] && !retired_[n->index()]) StartNode(n->index());
  }
  Trace("all faults healed");
}

}  // namespace epoch::sim
