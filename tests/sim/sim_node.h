// SimNode: one simulated server: the Raft core (raft::Node) plus the simulator's driver for it,
// i.e. what server/ does in production, with the clock, disk and network replaced by simulated
// ones:
//   - a clock ticking at its own rate (Tick() is called when the node's clock crosses a tick
//     boundary; rates differ by up to ρ between nodes);
//   - a durable log (raft::MemoryLog) and a disk with latency: each Ready that must be synced is
//     persisted asynchronously and completes after the disk latency (slow disks, stalls); a
//     crash loses the Ready in flight (the unsynced buffer) and keeps only the MemoryLog;
//   - the Ready order of raft/include/epoch/raft/ready.h: send `messages` at once; persist;
//     then send `messages_after_persist`, apply committed entries, serve reads, Advance;
//   - a KV state machine and client request handling: writes are proposed and answered at apply
//     time; linearizable reads go through ReadIndex (lease or heartbeat round, or forwarded by a
//     follower) and are served once applied >= the read index; serializable reads are served
//     locally at once.
// Every observation the invariant checker needs is reported as it happens.
//
// Who uses it: Simulation (events in, messages and responses out through NodeHost).
//
// Threading: single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "chain_log.h"
#include "checker.h"
#include "epoch/lincheck/kv_model.h"
#include "epoch/raft/config.h"
#include "epoch/raft/memory_log.h"
#include "epoch/raft/message.h"
#include "epoch/raft/node.h"
#include "epoch/raft/ready.h"
#include "kv_state_machine.h"
#include "prng.h"

namespace epoch::sim {

struct ClientRequest {
  std::uint64_t request_id = 0;  // unique in the run; 0 = the simulator's liveness probe
  int client = -1;
  lincheck::KvInput input;
  bool serializable = false;  // reads only: served from local state, not checked
};

struct ClientResponse {
  enum class Status : std::uint8_t {
    kOk,
    kNotLeader,  // definitely not applied; leader_hint may help
    kFailed,     // definitely not applied (proposal refused or overwritten, no leader known)
  };
  std::uint64_t request_id = 0;
  int client = -1;
  Status status = Status::kOk;
  lincheck::KvOutput output;
  NodeId leader_hint;
  bool via_lease = false;
};

// What a SimNode needs from the simulation around it.
class NodeHost {
 public:
  virtual ~NodeHost() = default;
  [[nodiscard]] virtual std::int64_t Now() const = 0;
  virtual void SendPeer(const raft::Message& message) = 0;
  virtual void Respond(int node_index, const ClientResponse& response) = 0;
  // Calls PersistDone(token) on the node at `at`.
  virtual void SchedulePersist(int node_index, std::uint64_t token, std::int64_t at) = 0;
  virtual InvariantChecker& checker() = 0;
  // State-machine images by snapshot index (the simulator's stand-in for streaming snapshot data:
  // by state-machine safety, the state at an index is the same on every node). Index 0 and the
  // bootstrap index hold the empty state.
  [[nodiscard]] virtual KvStateMachine SnapshotImage(LogIndex index) const = 0;
  virtual void SaveSnapshotImage(LogIndex index, const KvStateMachine& image) = 0;
  // A kConfChange entry was applied by some node.
  virtual void OnConfChangeApplied(const raft::Entry& entry) = 0;
  // A client write (request_id > 0) was applied by some node's state machine just now, with
  // this result (what its client is or would have been told).
  virtual void OnApplied(std::uint64_t request_id, const lincheck::KvOutput& output) = 0;
  // Verbose runs print a trace; Trace() is only called when tracing() is true.
  [[nodiscard]] virtual bool tracing() const = 0;
  virtual void Trace(const std::string& what) const = 0;
};

struct DiskState {
  std::int64_t latency_min_us = 100;
  std::int64_t latency_max_us = 1000;
  std::int64_t slow_extra_us = 0;     // slow-disk fault: added to every write
  std::int64_t stalled_until_us = 0;  // stalled-disk fault: no write completes before this
};

struct NodeStats {
  std::uint64_t lease_reads = 0;
  std::uint64_t read_index_reads = 0;
  std::uint64_t serializable_reads = 0;
  std::uint64_t writes_applied = 0;
  std::uint64_t readies = 0;
  std::uint64_t compactions = 0;
  std::uint64_t snapshots_installed = 0;
};

class SimNode {
 public:
  SimNode(int index, raft::Config config, NodeHost& host, Prng rng);
  ~SimNode();

  // An initial member: durable log = the bootstrap snapshot of `voters`.
  void Bootstrap(const std::vector<NodeId>& voters);
  // A node that will join: empty durable log, no configuration (it receives a snapshot).
  void Join();
  // (Re)starts the core from the durable log; the state machine is rebuilt by replaying.
  void Start();
  // Loses everything not durable: the core, the Ready being persisted, pending requests.
  void Crash();

  void Tick();
  void Deliver(const raft::Message& message);
  void HandleClient(const ClientRequest& request);
  // The write of the Ready in flight completed (stale tokens are ignored).
  void PersistDone(std::uint64_t token);
  // A stalled or slow disk recovered: the write in flight completes after a normal latency.
  void RecoverDisk();
  void TransferLeadership(NodeId target);
  // A cluster timing change reached this node: the core adopts it now if up, and the node starts
  // with it from now on, withholding at start for the floor it replaced (the driver keeps both,
  // as the server keeps the cluster setting and the one before it).
  void UpdateTiming(const raft::Timing& timing);
  raft::ProposeResult ProposeConfChange(const raft::ConfChange& change);
  // The out-of-band snapshot transfer to `peer` finished (ok) or failed.
  void ReportSnapshot(NodeId peer, bool ok, std::uint64_t incarnation);
  // Proposes the liveness probe if leader; returns whether it was proposed.
  bool ProposeProbe();

  [[nodiscard]] bool up() const { return core_ != nullptr; }
  [[nodiscard]] int index() const { return index_; }
  [[nodiscard]] NodeId id() const { return config_.id; }
  [[nodiscard]] std::uint64_t incarnation() const { return incarnation_; }
  [[nodiscard]] const raft::Node* core() const { return core_.get(); }
  [[nodiscard]] const ChainLog& durable_chain() const { return durable_chain_; }
  [[nodiscard]] NodeView View() const;
  [[nodiscard]] LogIndex applied() const { return applied_; }
  [[nodiscard]] std::uint64_t StateDigest() const { return state_.Digest(); }
  [[nodiscard]] const NodeStats& stats() const { return stats_; }
  [[nodiscard]] bool probe_applied() const { return probe_applied_; }

  DiskState disk;
  // Compact the durable log at the applied index once it holds this many applied entries
  // (0 = never compact).
  std::uint64_t compact_every = 0;
  // Clock: real-time microseconds per tick of this node's clock (tick / rate).
  std::int64_t tick_period_us = 10000;

 private:
  void Drive();
  void Finish(raft::Ready ready);
  void MirrorEntries(const raft::Ready& ready);
  void PersistToDisk(const raft::Ready& ready);
  void Apply(const raft::Entry& entry);
  void MaybeCompact();
  void ServeReads();
  void RespondWrite(std::uint64_t request_id, int client, ClientResponse::Status status,
                    lincheck::KvOutput output = {});

  struct PendingWrite {
    Term term;
    ClientRequest request;
  };
  struct PendingRead {
    ClientRequest request;
    std::optional<LogIndex> index;  // set once the ReadState arrived
    bool via_lease = false;
  };

  int index_;
  raft::Config config_;
  NodeHost& host_;
  Prng rng_;
  std::uint64_t incarnation_ = 0;
  std::uint64_t persist_token_ = 0;  // identifies the write in flight (never reused)

  raft::MemoryLog disk_log_;  // durable: survives crashes
  ChainLog durable_chain_;    // shadow of disk_log_
  std::unique_ptr<raft::Node> core_;
  ChainLog mirror_;  // shadow of the core's log (durable + unstable), updated at GetReady
  std::optional<raft::Ready> in_flight_;  // handed out, being persisted, not yet Advanced

  KvStateMachine state_;
  LogIndex applied_;
  std::map<LogIndex, PendingWrite> pending_writes_;
  std::map<std::uint64_t, PendingRead> pending_reads_;  // by read context (= request id)
  bool probe_applied_ = false;
  NodeStats stats_;
};

}  // namespace epoch::sim
