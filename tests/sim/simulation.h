// Simulation: one seeded run of a whole simulated cluster (TigerBeetle VOPR / FoundationDB
// style). A single 64-bit seed chooses the run's parameters ("swarm": network quality, disk
// latency, clock rates within ρ, fault mix, client count) and drives every random choice after
// that, so a run replays exactly from its seed.
//
// A run has three phases:
//   1. faults: `steps` events with the nemesis injecting faults at random times (see FaultKind);
//   2. liveness: every fault is healed (crashed nodes restart, links and disks recover); a
//      leader able to commit must appear, and a probe proposal must commit, within bounds;
//   3. drain: clients stop issuing and their outstanding operations resolve or time out.
// The InvariantChecker runs after every event (a "step"); the first violation ends the run.
// Finally the client histories are checked for linearizability (lincheck), and nodes at the
// same applied index must hold identical state.
//
// Time is simulated real time in microseconds; each node's clock ticks at its own rate. Events
// at the same time run in the order they were scheduled.
//
// Who uses it: sim_runner (CLI), sim_tests (Catch2), and the failover measurement.
//
// Threading: single-threaded; independent Simulations may run on different threads.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <unordered_map>
#include <variant>
#include <vector>

#include "checker.h"
#include "client.h"
#include "network.h"
#include "options.h"
#include "prng.h"
#include "sim_node.h"

namespace epoch::sim {

// Parameters drawn from the seed (and adjusted per mutation so the bug can show).
struct Swarm {
  double rho = 0.05;  // configured drift bound; node clock rates lie in [1, 1 + rho]
  LinkState base_link;
  std::int64_t disk_min_us = 100;
  std::int64_t disk_max_us = 2000;
  int clients = 4;
  int keys = 3;
  std::int64_t client_timeout_us = 500000;
  std::int64_t fault_gap_min_us = 50000;
  std::int64_t fault_gap_max_us = 600000;
  std::int64_t fault_duration_max_us = 2000000;
  std::array<std::uint32_t, kFaultKindCount> weights{};
  std::uint64_t max_msg_bytes = 1U << 20;
  std::uint64_t compact_every = 0;  // SimNode::compact_every
};

// Spare node slots per run: nodes that join as new members after a removal.
inline constexpr int kSpareSlots = 3;

class Simulation final : public NodeHost {
 public:
  explicit Simulation(const SimOptions& options);
  ~Simulation() override;

  RunResult Run();

  // Failover measurement: a fault-free cluster with a settled leader; the leader crashes at a
  // random moment; returns microseconds from the crash until a new leader has committed an
  // entry of its own term, or -1 if none within `limit_us`. With `slow_disk_us` > 0, every disk
  // is first slowed by that much per write for 1 s (which raises every node's adaptive election
  // timeout) and the crash comes 0.8-1.2 s after the disks are fast again.
  std::int64_t MeasureFailover(std::int64_t limit_us, std::int64_t slow_disk_us = 0);

  // NodeHost.
  [[nodiscard]] std::int64_t Now() const override { return now_; }
  void SendPeer(const raft::Message& message) override;
  void Respond(int node_index, const ClientResponse& response) override;
  void SchedulePersist(int node_index, std::uint64_t token, std::int64_t at) override;
  InvariantChecker& checker() override { return checker_; }
  [[nodiscard]] KvStateMachine SnapshotImage(LogIndex index) const override;
  void SaveSnapshotImage(LogIndex index, const KvStateMachine& image) override;
  void OnConfChangeApplied(const raft::Entry& entry) override;
  void OnApplied(std::uint64_t request_id, const lincheck::KvOutput& output) override {
    first_applied_.try_emplace(request_id, now_, output);
  }
  [[nodiscard]] bool tracing() const override { return options_.verbose; }
  void Trace(const std::string& what) const override;

  [[nodiscard]] const Swarm& swarm() const { return swarm_; }

 private:
  enum class EventKind : std::uint8_t {
    kTick,
    kDeliver,
    kPersistDone,
    kClientArrive,
    kClientResponse,
    kClientWake,
    kClientTimeout,
    kInjectFault,
    kHeal,
    kRestart,
    kReportSnapshot,
    kRetire,
    kTimingApply,  // tag: index into timing_changes_
  };
  struct Event {
    std::int64_t time = 0;
    std::uint64_t seq = 0;
    EventKind kind = EventKind::kTick;
    int target = 0;         // node or client index
    std::uint64_t tag = 0;  // incarnation, request id or heal id
    std::uint64_t aux = 0;  // kReportSnapshot: peer id * 2 + ok
    std::variant<std::monostate, raft::Message, ClientRequest, ClientResponse> payload;
  };

  void Push(Event event);
  bool StepOnce();
  void Dispatch(Event& event);
  void DispatchClient(Event& event);
  void AfterStep();
  void ScheduleTick(int node, std::int64_t at);
  void WakeClient(int client);

  // Nemesis (nemesis.cc).
  void InjectFault();
  void InjectPartition(FaultKind kind);
  std::vector<int> ShuffledMembers();
  std::string CutPartition(FaultKind kind, std::vector<int>& perm, int leader);
  void InjectLinkFault(FaultKind kind);
  void InjectCrash();
  void InjectClockDrift(int node);
  void InjectDiskFault(FaultKind kind);
  void InjectTransfer();
  void InjectMembershipChange();
  void InjectTimingChange();
  void StartNode(int index);
  void UpdateMembers();
  std::uint64_t AddHeal(std::function<void()> heal);
  void HealEverything();
  [[nodiscard]] int LeaderIndex() const;
  [[nodiscard]] std::vector<int> UpNodes() const;

  // Setup (setup.cc).
  void DrawSwarm();
  void AdjustForMutation();
  [[nodiscard]] raft::Config NodeConfig(int index) const;
  [[nodiscard]] double DrawClockRate();
  void Setup();

  // Phases (simulation.cc).
  bool RunFaultPhase();
  bool RunLivenessPhase();
  void RunDrainPhase();
  void CheckHistories(RunResult& result);
  void CheckConvergence();
  [[nodiscard]] bool Violated() const { return !checker_.violations().empty(); }

  SimOptions options_;
  Prng master_;
  Prng nemesis_rng_;
  Swarm swarm_;
  std::int64_t now_ = 0;
  std::uint64_t seq_ = 0;
  std::uint64_t steps_ = 0;
  std::vector<Event> heap_;
  InvariantChecker checker_;
  std::unique_ptr<SimNetwork> network_;
  std::vector<std::unique_ptr<SimNode>> nodes_;
  std::vector<std::unique_ptr<SimClient>> clients_;
  std::vector<NodeView> views_;
  std::vector<std::pair<raft::Role, Term>> traced_roles_;  // verbose: last role/term per node
  bool clients_active_ = true;
  bool faults_active_ = true;  // the nemesis stops for good when the liveness phase begins
  std::uint64_t next_request_id_ = 1;
  // request id -> simulated time some node first applied it, and the result (history patching).
  std::unordered_map<std::uint64_t, std::pair<std::int64_t, lincheck::KvOutput>> first_applied_;
  std::map<std::uint64_t, std::function<void()>> heals_;
  std::uint64_t next_heal_id_ = 1;
  std::uint64_t partition_heal_ = 0;  // heal id of the active partition (0 = none)
  std::uint64_t link_heal_ = 0;       // heal id of the active link fault (0 = none)
  std::array<std::uint64_t, kFaultKindCount> faults_{};
  std::vector<raft::Timing> timing_changes_;  // every timing change injected, in order
  std::int64_t liveness_us_ = -1;
  bool calm_ = false;  // failover measurement: a quiet LAN, no faults

  // Membership. Slots beyond the initial nodes are spares that join as new members (ids are never
  // reused); a node whose removal was applied is retired (stopped for good).
  int slots_ = 0;
  int next_spare_ = 0;
  std::vector<bool> started_;
  std::vector<bool> retired_;
  std::vector<int> members_;   // started and not retired: where clients send requests
  raft::ConfState conf_;       // the latest applied configuration (first node to apply wins)
  raft::ConfState prev_conf_;  // the one before it (nodes may still be using it)
  LogIndex conf_index_;
  std::map<LogIndex, KvStateMachine> images_;  // state-machine snapshots by index
};

}  // namespace epoch::sim
