#include "simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "epoch/lincheck/checker.h"
#include "epoch/raft/conf_change.h"

namespace epoch::sim {

namespace {

bool Later(const auto& a, const auto& b) {
  return a.time != b.time ? a.time > b.time : a.seq > b.seq;
}

// Lincheck step budget per run: deterministic (unlike a time limit), and far above what the
// histories of a run need (typically < 10^5 steps).
constexpr std::uint64_t kLincheckStepBudget = 50'000'000;

}  // namespace

Simulation::Simulation(const SimOptions& options)
    : options_(options), master_(options.seed), nemesis_rng_(master_.Fork(3)) {}

Simulation::~Simulation() = default;

void Simulation::Push(Event event) {
  event.seq = seq_++;
  heap_.push_back(std::move(event));
  std::push_heap(heap_.begin(), heap_.end(),
                 [](const Event& a, const Event& b) { return Later(a, b); });
}

bool Simulation::StepOnce() {
  if (heap_.empty()) return false;
  std::pop_heap(heap_.begin(), heap_.end(),
                [](const Event& a, const Event& b) { return Later(a, b); });
  Event event = std::move(heap_.back());
  heap_.pop_back();
  now_ = event.time;
  Dispatch(event);
  ++steps_;
  AfterStep();
  return true;
}

KvStateMachine Simulation::SnapshotImage(LogIndex index) const {
  if (index <= raft::kBootstrapIndex) return KvStateMachine{};
  auto it = images_.find(index);
  if (it == images_.end()) {
    fmt::print(stderr, "simulator: no state-machine image at snapshot index {}\n", index);
    std::abort();
  }
  return it->second;
}

void Simulation::SaveSnapshotImage(LogIndex index, const KvStateMachine& image) {
  auto [it, inserted] = images_.try_emplace(index, image);
  if (!inserted && it->second.Digest() != image.Digest()) {
    checker_.Report(
        Invariant::kStateMachineSafety, now_,
        fmt::format("two nodes hold different state-machine states at index {}", index));
  }
}

void Simulation::OnConfChangeApplied(const raft::Entry& entry) {
  if (entry.index <= conf_index_) return;  // another node applied it first
  conf_index_ = entry.index;
  std::optional<raft::ConfChange> change = raft::DecodeConfChange(entry.data);
  if (!change) return;
  Result<raft::ConfState> next = raft::ApplyConfChange(conf_, *change);
  if (!next.ok()) return;  // refused by the core too: a no-op
  prev_conf_ = conf_;
  conf_ = *next;
  if (change->type == raft::ConfChangeType::kRemoveNode) {
    // Give a removed leader time to hand over (TimeoutNow) before stopping it for good.
    Event e;
    e.time = now_ + 300'000;
    e.kind = EventKind::kRetire;
    e.target = static_cast<int>(change->node.value()) - 1;
    Push(std::move(e));
  }
  Trace(fmt::format("configuration at index {}: {} voters, {} learners", entry.index,
                    conf_.voters.size(), conf_.learners.size()));
}

void Simulation::UpdateMembers() {
  members_.clear();
  for (int i = 0; i < slots_; ++i) {
    if (started_[i] && !retired_[i]) members_.push_back(i);
  }
}

void Simulation::StartNode(int index) {
  started_[index] = true;
  nodes_[index]->Start();
  ScheduleTick(index, now_ + master_.Range(1, nodes_[index]->tick_period_us));
  UpdateMembers();
}

void Simulation::AfterStep() {
  views_.clear();
  for (const auto& n : nodes_) views_.push_back(n->View());
  if (options_.verbose) {
    traced_roles_.resize(nodes_.size());
    for (std::size_t i = 0; i < views_.size(); ++i) {
      std::pair<raft::Role, Term> rt{views_[i].role, views_[i].term};
      if (views_[i].up && rt != traced_roles_[i]) {
        Trace(fmt::format("node {} is {} in term {}", i + 1, raft::RoleName(rt.first), rt.second));
      }
      traced_roles_[i] = rt;
    }
  }
  checker_.AfterStep(views_, {&conf_.voters, &prev_conf_.voters}, now_);
}

void Simulation::ScheduleTick(int node, std::int64_t at) {
  Event e;
  e.time = at;
  e.kind = EventKind::kTick;
  e.target = node;
  e.tag = nodes_[node]->incarnation();
  Push(std::move(e));
}

void Simulation::SendPeer(const raft::Message& message) {
  const int from = static_cast<int>(message.from.value()) - 1;
  const int to = static_cast<int>(message.to.value()) - 1;
  if (to < 0 || to >= static_cast<int>(nodes_.size())) return;
  std::vector<std::int64_t> times = network_->Route(from, to, now_);
  if (message.type == raft::MessageType::kInstallSnapshot) {
    // The image streams out of band with the meta; the sender learns the outcome when it has
    // arrived (or, if it was lost, after a transfer timeout).
    Event report;
    report.time = times.empty() ? now_ + 100'000 : times.front();
    report.kind = EventKind::kReportSnapshot;
    report.target = from;
    report.tag = nodes_[from]->incarnation();
    report.aux = message.to.value() * 2 + (times.empty() ? 0 : 1);
    Push(std::move(report));
  }
  for (std::int64_t at : times) {
    Event e;
    e.time = at;
    e.kind = EventKind::kDeliver;
    e.target = to;
    e.payload = message;
    Push(std::move(e));
  }
}

void Simulation::Respond(int node_index, const ClientResponse& response) {
  if (response.client < 0 || !network_->ClientReachable(node_index)) return;
  Event e;
  e.time = now_ + network_->ClientDelay();
  e.kind = EventKind::kClientResponse;
  e.target = response.client;
  e.payload = response;
  Push(std::move(e));
}

void Simulation::SchedulePersist(int node_index, std::uint64_t token, std::int64_t at) {
  Event e;
  e.time = at;
  e.kind = EventKind::kPersistDone;
  e.target = node_index;
  e.tag = token;
  Push(std::move(e));
}

void Simulation::WakeClient(int client) {
  if (!clients_active_) return;
  Event e;
  e.time = now_ + clients_[client]->ThinkTime();
  e.kind = EventKind::kClientWake;
  e.target = client;
  Push(std::move(e));
}

void Simulation::DispatchClient(Event& event) {
  switch (event.kind) {
    case EventKind::kClientArrive:
      if (network_->ClientReachable(event.target)) {
        nodes_[event.target]->HandleClient(std::get<ClientRequest>(event.payload));
      }
      return;
    case EventKind::kClientResponse:
      if (clients_[event.target]->OnResponse(std::get<ClientResponse>(event.payload), now_)) {
        WakeClient(event.target);
      }
      return;
    case EventKind::kClientWake: {
      SimClient& client = *clients_[event.target];
      if (!clients_active_ || client.busy()) return;
      auto [request, node] = client.Begin(next_request_id_++, now_);
      Event timeout;
      timeout.time = now_ + client.timeout_us();
      timeout.kind = EventKind::kClientTimeout;
      timeout.target = event.target;
      timeout.tag = request.request_id;
      Push(std::move(timeout));
      if (network_->ClientReachable(node)) {
        Event arrive;
        arrive.time = now_ + network_->ClientDelay();
        arrive.kind = EventKind::kClientArrive;
        arrive.target = node;
        arrive.payload = std::move(request);
        Push(std::move(arrive));
      }
      return;
    }
    case EventKind::kClientTimeout: {
      SimClient& client = *clients_[event.target];
      const bool was_busy = client.busy();
      client.OnTimeout(event.tag, now_);
      if (was_busy && !client.busy()) WakeClient(event.target);
      return;
    }
    default: return;
  }
}

void Simulation::Dispatch(Event& event) {
  switch (event.kind) {
    case EventKind::kTick: {
      SimNode& node = *nodes_[event.target];
      if (!node.up() || node.incarnation() != event.tag) return;
      node.Tick();
      if (node.up()) ScheduleTick(event.target, now_ + node.tick_period_us);
      return;
    }
    case EventKind::kDeliver: {
      const auto& m = std::get<raft::Message>(event.payload);
      const int from = static_cast<int>(m.from.value()) - 1;
      if (network_->Cut(from, event.target)) return;  // cut while in flight
      nodes_[event.target]->Deliver(m);
      return;
    }
    case EventKind::kPersistDone: nodes_[event.target]->PersistDone(event.tag); return;
    case EventKind::kClientArrive:
    case EventKind::kClientResponse:
    case EventKind::kClientWake:
    case EventKind::kClientTimeout: DispatchClient(event); return;
    case EventKind::kInjectFault: InjectFault(); return;
    case EventKind::kHeal: {
      auto it = heals_.find(event.tag);
      if (it == heals_.end()) return;
      std::function<void()> heal = std::move(it->second);
      heals_.erase(it);
      heal();
      return;
    }
    case EventKind::kReportSnapshot:
      nodes_[event.target]->ReportSnapshot(NodeId(event.aux / 2), event.aux % 2 == 1, event.tag);
      return;
    case EventKind::kRetire:
      if (retired_[event.target]) return;
      retired_[event.target] = true;
      nodes_[event.target]->Crash();
      UpdateMembers();
      Trace(fmt::format("node {} retired (removed from the configuration)", event.target + 1));
      return;
    case EventKind::kTimingApply:
      if (retired_[event.target]) return;
      nodes_[event.target]->UpdateTiming(timing_changes_[event.tag]);
      return;
    case EventKind::kRestart: {
      SimNode& node = *nodes_[event.target];
      if (node.up() || retired_[event.target]) return;
      Trace(fmt::format("restart node {}", node.id()));
      node.Start();
      ScheduleTick(event.target, now_ + master_.Range(1, node.tick_period_us));
      return;
    }
  }
}

void Simulation::Trace(const std::string& what) const {
  if (options_.verbose) fmt::print("[{:>10.3f} ms] {}\n", static_cast<double>(now_) / 1000.0, what);
}

std::vector<int> Simulation::UpNodes() const {
  std::vector<int> up;
  for (const auto& n : nodes_) {
    if (n->up()) up.push_back(n->index());
  }
  return up;
}

int Simulation::LeaderIndex() const {
  int best = -1;
  for (const auto& n : nodes_) {
    if (!n->up() || n->core()->role() != raft::Role::kLeader) continue;
    if (best < 0 || n->core()->term() > nodes_[best]->core()->term()) best = n->index();
  }
  return best;
}

bool Simulation::RunFaultPhase() {
  while (steps_ < options_.steps && !Violated()) {
    if (!StepOnce()) return false;
  }
  return !Violated();
}

bool Simulation::RunLivenessPhase() {
  HealEverything();
  const std::int64_t healed_at = now_;
  const raft::Config& c = raft::Config{};
  // Bound: three maximal election timeouts (adaptive base at its cap plus jitter), then one
  // more second for the probe to commit. Node clocks run at rate >= 1, so ticks are no slower.
  const std::int64_t leader_bound_us =
      3 * (c.max_election_timeout_ticks + c.election_jitter_ticks) * options_.tick_us;
  const std::int64_t deadline = healed_at + leader_bound_us + 1'000'000;
  Term probe_term;
  while (!Violated() && now_ <= deadline) {
    bool committed = false;
    for (const auto& n : nodes_) committed = committed || n->probe_applied();
    if (committed) {
      liveness_us_ = now_ - healed_at;
      return true;
    }
    int leader = LeaderIndex();
    if (leader >= 0 && nodes_[leader]->core()->term() > probe_term &&
        nodes_[leader]->ProposeProbe()) {
      probe_term = nodes_[leader]->core()->term();
    }
    if (!StepOnce()) break;
  }
  if (!Violated()) {
    checker_.Report(Invariant::kLiveness, now_,
                    fmt::format("no proposal committed within {} ms after every fault healed "
                                "(leader: {})",
                                (now_ - healed_at) / 1000, LeaderIndex() + 1));
  }
  return false;
}

void Simulation::RunDrainPhase() {
  clients_active_ = false;
  std::int64_t deadline = now_ + swarm_.client_timeout_us + 1000;
  auto busy = [&] {
    return std::any_of(clients_.begin(), clients_.end(), [](const auto& c) { return c->busy(); });
  };
  while (!Violated() && busy() && now_ <= deadline) {
    if (!StepOnce()) break;
  }
  for (auto& c : clients_) c->Finish();
}

// Histories are patched with what the simulator knows, as etcd's robustness tests patch theirs
// from the WAL: a write whose client timed out but that no node ever applied cannot have been
// observed by anyone (had it committed after the run, it would linearize after every other
// operation), so it is left out; one that was applied took effect by the time of its first
// apply, which becomes its return time, with the result the state machine computed (what its
// client would have been told). Otherwise every unknown write stays pending to the end
// of the history and the search grows exponentially with their number.
void Simulation::CheckHistories(RunResult& result) {
  std::vector<lincheck::KvModel::Op> history;
  for (const auto& c : clients_) {
    for (std::size_t i = 0; i < c->history().size(); ++i) {
      lincheck::KvModel::Op op = c->history()[i];
      if (op.return_time == lincheck::kNeverReturned) {
        ++result.ops_unknown;
        auto applied = first_applied_.find(c->request_ids()[i]);
        if (applied == first_applied_.end()) {
          ++result.ops_unknown_dropped;
          continue;
        }
        ++result.ops_unknown_resolved;
        op.return_time = applied->second.first;
        op.output = applied->second.second;
      }
      history.push_back(std::move(op));
    }
    result.serializable_reads += c->stats().serializable;
  }
  result.ops_checked = history.size();
  lincheck::CheckResult r =
      lincheck::Check(lincheck::KvModel{}, history, lincheck::Budget{{}, kLincheckStepBudget});
  result.lincheck = r.verdict;
  result.lincheck_steps = r.steps;
  if (r.verdict != lincheck::Verdict::kOk) {
    checker_.Report(Invariant::kLinearizability, now_,
                    fmt::format("client history {} (key {}):\n{}", lincheck::VerdictName(r.verdict),
                                r.failing_partition, r.description));
  }
}

void Simulation::CheckConvergence() {
  std::map<LogIndex, std::pair<NodeId, std::uint64_t>> by_applied;
  for (const auto& n : nodes_) {
    if (!n->up()) continue;
    auto [it, inserted] = by_applied.try_emplace(n->applied(), n->id(), n->StateDigest());
    if (!inserted && it->second.second != n->StateDigest()) {
      checker_.Report(Invariant::kConvergence, now_,
                      fmt::format("nodes {} and {} applied up to {} but hold different states",
                                  it->second.first, n->id(), n->applied()));
    }
  }
}

RunResult Simulation::Run() {
  Setup();
  if (RunFaultPhase() && RunLivenessPhase()) RunDrainPhase();
  RunResult result;
  for (auto& c : clients_) c->Finish();
  if (!Violated()) CheckHistories(result);
  if (!Violated()) CheckConvergence();
  result.seed = options_.seed;
  result.nodes = options_.nodes;
  result.mutation = options_.mutation;
  result.steps = steps_;
  result.sim_time_us = now_;
  result.faults = faults_;
  result.elections = checker_.leaders_elected();
  for (const auto& n : nodes_) {
    result.lease_reads += n->stats().lease_reads;
    result.read_index_reads += n->stats().read_index_reads;
    result.compactions += n->stats().compactions;
    result.snapshots_installed += n->stats().snapshots_installed;
  }
  result.liveness_leader_us = liveness_us_;
  const std::int64_t margin = checker_.min_lease_margin_us();
  result.min_lease_margin_us = margin == std::numeric_limits<std::int64_t>::max() ? -1 : margin;
  result.violations = checker_.violations();
  return result;
}

std::int64_t Simulation::MeasureFailover(std::int64_t limit_us, std::int64_t slow_disk_us) {
  calm_ = true;
  Setup();
  auto run_until = [this](std::int64_t at) {
    while (!Violated() && now_ < at) {
      if (!StepOnce()) return false;
    }
    return !Violated();
  };
  // Let a leader settle, then crash it at a random moment.
  std::int64_t crash_at = 1'000'000 + master_.Range(0, 500'000);
  if (slow_disk_us > 0) {
    if (!run_until(1'000'000)) return -1;
    for (auto& n : nodes_) n->disk.slow_extra_us = slow_disk_us;
    if (!run_until(2'000'000)) return -1;
    for (auto& n : nodes_) n->RecoverDisk();
    crash_at = 2'800'000 + master_.Range(0, 400'000);
  }
  if (!run_until(crash_at)) return -1;
  int leader = LeaderIndex();
  if (leader < 0 || Violated()) return -1;
  const Term old_term = nodes_[leader]->core()->term();
  nodes_[leader]->Crash();
  const std::int64_t crashed_at = now_;
  while (!Violated() && now_ - crashed_at <= limit_us) {
    if (checker_.max_committed_entry_term() > old_term) return now_ - crashed_at;
    if (!StepOnce()) break;
  }
  return -1;
}

}  // namespace epoch::sim
