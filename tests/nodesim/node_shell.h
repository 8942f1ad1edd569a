// NodeShell: one Epoch member's node logic — the production RaftDriver (its Ready pipeline, tick
// catch-up, proposal and ReadIndex batching, lease reads) persisting through WalLog and the WAL
// (wal::Wal, Options::manual_sync) on its own SimFileSystem, over the production KvStateMachine
// and KvStore (RocksDB on a temporary directory) — run on the simulator's thread. Its io_context
// is never run by a thread: the simulator polls it after each input. The driver reads the
// node's simulated clock (RaftDriverOptions::clock), its tick timer is an event of the simulator
// (RaftDriverOptions::schedule_tick), and the WAL writes only when the simulator says the disk
// got there (SyncDisk), so the run replays from its seed.
//
// A crash is a power loss: the file system keeps what was synced and a random part of the rest
// (pages lost, torn, reordered: SimFileSystem::CrashRandom); the process objects are destroyed
// without running anything queued; RocksDB is closed without flushing (KvStoreOptions::
// skip_flush_on_close). Start opens the WAL again (recovery truncates a torn tail) and builds the
// process over what survived, as epochd does.
//
// Threading: the simulator's thread only.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epoch/replication/kv_state_machine.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/replication/wal_log.h"
#include "epoch/state/kv_store.h"
#include "epoch/wal/sim_file_system.h"
#include "epoch/wal/wal.h"

namespace epoch::nodesim {

// A node's clock over the simulator's global time (µs): local = anchor_local + (global -
// anchor_global) * rate, in ns; monotonic across rate changes (re-anchored at each).
class NodeClock {
 public:
  explicit NodeClock(const std::int64_t* global_us) : global_us_(global_us) {}
  [[nodiscard]] std::int64_t LocalNs() const {
    return anchor_local_ + static_cast<std::int64_t>(
                               static_cast<double>(*global_us_ * 1000 - anchor_global_) * rate_);
  }
  void SetRate(double rate) {
    anchor_local_ = LocalNs();
    anchor_global_ = *global_us_ * 1000;
    rate_ = rate;
  }
  [[nodiscard]] double rate() const { return rate_; }

 private:
  const std::int64_t* global_us_;
  std::int64_t anchor_local_ = 0;
  std::int64_t anchor_global_ = 0;
  double rate_ = 1.0;
};

struct NodeShellOptions {
  raft::Config raft;  // raft.id is the node's id
  std::string store_dir;
  std::uint64_t seed = 0;
  server::RaftDriverOptions::Mutations driver_mutations;
  // Runs `fire` after `delay` of global simulated time, unless the node's life `incarnation` has
  // ended by then.
  std::function<void(std::int64_t delay_us, std::uint64_t incarnation, std::function<void()> fire)>
      schedule;
};

class NodeShell {
 public:
  // `voters`: the initial members (the WAL starts from raft::BootstrapSnapshot(voters)).
  NodeShell(NodeShellOptions options, std::vector<NodeId> voters, const std::int64_t* global_us,
            server::MessageSender& sender);
  ~NodeShell();

  // Builds the process objects over the surviving disk and store and starts the driver.
  void Start();
  // Power loss: nothing queued runs; unsynced disk writes are lost, torn or reordered as the
  // seed draws them.
  wal::CrashStats Crash(std::uint64_t seed);
  [[nodiscard]] bool up() const { return driver_ != nullptr; }
  // The next fdatasync of the WAL fails (EIO) — after a power loss drawn from `seed`, with its
  // frame written and not synced, if `power_loss`. The WAL fails for good and the driver stops
  // (fail-stop, never a retry); failed() then holds until the next Start.
  void FailNextSync(bool power_loss, std::uint64_t seed);
  void ClearDiskFault();
  [[nodiscard]] bool failed() const { return failed_; }
  // Incremented by every Start: events of an earlier life are ignored.
  [[nodiscard]] std::uint64_t incarnation() const { return incarnation_; }

  // Runs every handler that is ready on this node's clock.
  void Poll();

  [[nodiscard]] NodeId id() const { return options_.raft.id; }
  [[nodiscard]] server::RaftDriver& driver() { return *driver_; }
  [[nodiscard]] server::KvStore& store() { return *store_; }
  // The WAL has requests that are not on the disk yet; SyncDisk writes and syncs them (one
  // frame) and runs their callbacks.
  [[nodiscard]] bool DiskPending() const { return wal_ != nullptr && wal_->HasPending(); }
  void SyncDisk() { wal_->SyncPending(); }
  [[nodiscard]] NodeClock& clock() { return clock_; }

 private:
  NodeShellOptions options_;
  std::vector<NodeId> voters_;
  wal::SimFileSystem fs_;  // survives crashes
  NodeClock clock_;
  server::MessageSender& sender_;
  std::uint64_t incarnation_ = 0;
  bool failed_ = false;
  std::shared_ptr<class SyncFault> sync_fault_;
  // The process. Destroyed in reverse: the driver (and its timers) before the io_context.
  std::unique_ptr<asio::io_context> io_;
  std::unique_ptr<wal::Wal> wal_;
  std::unique_ptr<server::WalLog> log_;
  std::unique_ptr<server::KvStore> store_;
  std::unique_ptr<server::KvStateMachine> state_machine_;
  std::unique_ptr<server::RaftDriver> driver_;
};

}  // namespace epoch::nodesim
