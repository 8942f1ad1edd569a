// Simulation setup: the run's parameters drawn from its seed ("swarm testing": every seed gets
// its own network quality, disk speed, clock drift, client load and fault mix, so that over many
// seeds every combination is tried), adjusted for a mutation so that the deliberate bug has a
// fault schedule that can expose it.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "epoch/raft/conf_change.h"
#include "simulation.h"

namespace epoch::sim {

namespace {

void SetWeight(Swarm& s, FaultKind kind, std::uint32_t weight) {
  s.weights[static_cast<std::size_t>(kind)] = weight;
}

}  // namespace

void Simulation::DrawSwarm() {
  Prng rng = master_.Fork(1);
  static constexpr double kRhos[] = {0.02, 0.05, 0.1, 0.25, 0.5};
  swarm_.rho = kRhos[rng.Below(5)];
  swarm_.base_link.delay_min_us = rng.Range(50, 500);
  swarm_.base_link.delay_max_us = swarm_.base_link.delay_min_us + rng.Range(0, 3000);
  swarm_.base_link.drop = rng.Chance(0.5) ? 0.0 : rng.Unit() * 0.02;
  swarm_.base_link.duplicate = rng.Chance(0.5) ? 0.0 : rng.Unit() * 0.02;
  swarm_.disk_min_us = rng.Range(50, 500);
  swarm_.disk_max_us = swarm_.disk_min_us + rng.Range(0, 5000);
  swarm_.clients = static_cast<int>(rng.Range(2, 6));
  swarm_.keys = static_cast<int>(rng.Range(1, 4));
  swarm_.client_timeout_us = rng.Range(200'000, 1'000'000);
  swarm_.fault_gap_min_us = rng.Range(20'000, 200'000);
  swarm_.fault_gap_max_us = swarm_.fault_gap_min_us + rng.Range(100'000, 800'000);
  swarm_.fault_duration_max_us = rng.Range(300'000, 3'000'000);
  static constexpr std::uint64_t kCompactEvery[] = {0, 0, 16, 64, 256};
  swarm_.compact_every = kCompactEvery[rng.Below(5)];
  bool any = false;
  for (auto& w : swarm_.weights) {
    w = rng.Chance(0.25) ? 0 : static_cast<std::uint32_t>(rng.Range(1, 10));
    any = any || w > 0;
  }
  if (!any) SetWeight(swarm_, FaultKind::kCrash, 1);
  if (calm_) {  // failover measurement: a quiet LAN, fast disks, no faults
    swarm_.rho = 0.05;
    swarm_.base_link = LinkState{0.0, 0.0, 100, 500, false};
    swarm_.disk_min_us = 100;
    swarm_.disk_max_us = 2000;
    swarm_.weights.fill(0);
  }
}

// Each deliberate bug needs a fault schedule that can expose it.
void Simulation::AdjustForMutation() {
  if (options_.mutation == Mutation::kNone) return;
  Swarm& s = swarm_;
  s.weights.fill(0);
  s.base_link = LinkState{0.0, 0.0, 50, 400, false};  // fast network: the new leader is quick
  s.disk_min_us = 50;
  s.disk_max_us = 500;
  s.clients = 5;
  s.keys = 2;
  s.fault_gap_min_us = 100'000;
  s.fault_gap_max_us = 600'000;
  s.fault_duration_max_us = 1'500'000;
  switch (options_.mutation) {
    case Mutation::kNone: break;
    case Mutation::kLeaseWithoutDriftMargin:
      // A leader cut from its followers keeps serving lease reads to clients while followers
      // with faster clocks elect a new leader.
      s.rho = 0.5;
      SetWeight(s, FaultKind::kPartitionLeaderIsolated, 10);
      SetWeight(s, FaultKind::kClockDrift, 2);
      break;
    case Mutation::kVoteWhileLeaderLive:
      // A follower that cannot hear the leader (and cannot tell it it is campaigning) wins
      // votes from followers that still hear it, while the old leader's lease runs.
      s.rho = 0.25;
      SetWeight(s, FaultKind::kPartitionAsymmetric, 10);
      SetWeight(s, FaultKind::kPartitionMajoritiesRing, 5);
      break;
    case Mutation::kNoElectionRestriction:
      // A follower falls behind (isolated), then the leader fails: the stale node may win.
      SetWeight(s, FaultKind::kPartitionFull, 6);
      SetWeight(s, FaultKind::kCrash, 6);
      SetWeight(s, FaultKind::kPartitionLeaderIsolated, 3);
      break;
    case Mutation::kCommitPriorTermByCounting:
      // Raft Fig. 8: leaders fail while their entries are partly replicated; one entry per
      // message so that an old entry can reach a majority without the new leader's no-op.
      s.max_msg_bytes = 1;
      s.base_link.drop = 0.05;
      SetWeight(s, FaultKind::kCrash, 8);
      SetWeight(s, FaultKind::kPartitionFull, 4);
      SetWeight(s, FaultKind::kPartitionLeaderIsolated, 4);
      SetWeight(s, FaultKind::kDrop, 3);
      break;
    case Mutation::kReplyBeforePersist:
      // Acknowledgements before the disk is done: slow disks and crashes lose acked entries.
      s.disk_min_us = 1000;
      s.disk_max_us = 20000;
      SetWeight(s, FaultKind::kCrash, 6);
      SetWeight(s, FaultKind::kSlowDisk, 4);
      break;
    case Mutation::kReadIndexWithoutQuorum:
      // A deposed leader, still reachable by clients, answers ReadIndex from its stale commit.
      s.rho = 0.5;
      SetWeight(s, FaultKind::kPartitionLeaderIsolated, 10);
      break;
    case Mutation::kLeaseFromOwnFloor:
    case Mutation::kLowerFloorWithoutHold:
      // Floors change often, node by node, while leaders get cut from their followers: a lease
      // longer than some quorum member's floor, or a floor lowered under a running lease, lets
      // the followers elect a new leader while the old one still reads from its lease.
      SetWeight(s, FaultKind::kTimingChange, 10);
      SetWeight(s, FaultKind::kPartitionLeaderIsolated, 6);
      break;
    case Mutation::kApplyBeforeDurable:
      // Followers get entries and the commit index that covers them in one append: slow disks
      // leave them applied before they are written.
      s.disk_min_us = 1000;
      s.disk_max_us = 20000;
      SetWeight(s, FaultKind::kSlowDisk, 4);
      break;
  }
}

raft::Config Simulation::NodeConfig(int index) const {
  raft::Config c;
  c.id = NodeId(static_cast<std::uint64_t>(index) + 1);
  c.max_clock_drift = swarm_.rho;
  c.max_msg_bytes = swarm_.max_msg_bytes;
  c.max_inflight_bytes = std::max<std::uint64_t>(c.max_inflight_bytes, c.max_msg_bytes);
  raft::Config::Mutations& m = c.mutations;
  m.no_election_restriction = options_.mutation == Mutation::kNoElectionRestriction;
  m.commit_prior_term_by_counting = options_.mutation == Mutation::kCommitPriorTermByCounting;
  m.lease_without_drift_margin = options_.mutation == Mutation::kLeaseWithoutDriftMargin;
  m.vote_while_leader_live = options_.mutation == Mutation::kVoteWhileLeaderLive;
  m.reply_before_persist = options_.mutation == Mutation::kReplyBeforePersist;
  m.read_index_without_quorum = options_.mutation == Mutation::kReadIndexWithoutQuorum;
  m.apply_before_durable = options_.mutation == Mutation::kApplyBeforeDurable;
  m.lease_from_own_floor = options_.mutation == Mutation::kLeaseFromOwnFloor;
  m.lower_floor_without_hold = options_.mutation == Mutation::kLowerFloorWithoutHold;
  Status valid = c.Validate();
  if (!valid.ok()) {
    fmt::print(stderr, "simulator built an invalid raft::Config: {}\n", valid.ToString());
    std::abort();
  }
  return c;
}

// Clock rates lie in [1, 1 + ρ] so that any two differ by at most ρ; the extremes are favoured
// because that is where lease bugs show.
double Simulation::DrawClockRate() {
  std::uint64_t dice = nemesis_rng_.Below(3);
  double u = dice == 0 ? 0.0 : dice == 1 ? 1.0 : nemesis_rng_.Unit();
  return 1.0 + swarm_.rho * u;
}

void Simulation::Setup() {
  DrawSwarm();
  AdjustForMutation();
  const int n = options_.nodes;
  slots_ = n + kSpareSlots;
  next_spare_ = n;
  started_.assign(static_cast<std::size_t>(slots_), false);
  retired_.assign(static_cast<std::size_t>(slots_), false);
  network_ = std::make_unique<SimNetwork>(slots_, swarm_.base_link, 300, master_.Fork(2));
  std::vector<NodeId> voters;
  for (int i = 0; i < n; ++i) voters.emplace_back(static_cast<std::uint64_t>(i) + 1);
  conf_ = raft::BootstrapSnapshot(voters).conf;
  prev_conf_ = conf_;
  conf_index_ = raft::kBootstrapIndex;
  double min_rate = 2.0;
  double max_rate = 0.0;
  for (int i = 0; i < slots_; ++i) {
    auto node = std::make_unique<SimNode>(i, NodeConfig(i), *this,
                                          master_.Fork(100 + static_cast<std::uint64_t>(i)));
    if (i < n) {
      node->Bootstrap(voters);
    } else {
      node->Join();
    }
    double rate = calm_ ? 1.0 + swarm_.rho * nemesis_rng_.Unit() : DrawClockRate();
    if (i < n) {
      min_rate = std::min(min_rate, rate);
      max_rate = std::max(max_rate, rate);
    }
    node->tick_period_us = static_cast<std::int64_t>(static_cast<double>(options_.tick_us) / rate);
    node->disk.latency_min_us = swarm_.disk_min_us;
    node->disk.latency_max_us = swarm_.disk_max_us;
    node->compact_every = swarm_.compact_every;
    nodes_.push_back(std::move(node));
  }
  if (!calm_ && max_rate > min_rate) ++faults_[static_cast<std::size_t>(FaultKind::kClockDrift)];
  for (int i = 0; i < n; ++i) StartNode(i);
  for (int c = 0; c < swarm_.clients; ++c) {
    clients_.push_back(
        std::make_unique<SimClient>(c, &members_, swarm_.keys, swarm_.client_timeout_us,
                                    master_.Fork(200 + static_cast<std::uint64_t>(c))));
    WakeClient(c);
  }
  Event fault;
  fault.time = nemesis_rng_.Range(swarm_.fault_gap_min_us, swarm_.fault_gap_max_us);
  fault.kind = EventKind::kInjectFault;
  Push(std::move(fault));
}

}  // namespace epoch::sim
