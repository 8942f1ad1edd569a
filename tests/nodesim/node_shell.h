// NodeShell: one Epoch member's node logic — the production RaftDriver (its Ready pipeline, tick
// catch-up, proposal and ReadIndex batching, lease reads) over the production KvStateMachine and
// KvStore (RocksDB on a temporary directory) — run on the simulator's thread. Its io_context is
// never run by a thread: the simulator polls it after each input. The driver reads the node's
// simulated clock (RaftDriverOptions::clock) and its tick timer is an event of the simulator
// (RaftDriverOptions::schedule_tick), so the run replays from its seed.
//
// A crash destroys the driver, the state machine and the io_context without running anything
// queued (the process died), closes RocksDB without flushing (KvStoreOptions::
// skip_flush_on_close) and drops the disk's unsynced writes (SimDurableLog::Crash). Restart builds
// them again over what survived.
//
// Threading: the simulator's thread only.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "epoch/replication/kv_state_machine.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/state/kv_store.h"
#include "sim_durable_log.h"

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
  NodeShell(NodeShellOptions options, raft::MemoryLog initial_log, const std::int64_t* global_us,
            server::MessageSender& sender);
  ~NodeShell();

  // Builds the process objects over the surviving disk and store and starts the driver.
  void Start();
  // The process dies: nothing queued runs; unsynced disk writes are lost.
  void Crash();
  [[nodiscard]] bool up() const { return driver_ != nullptr; }
  // Incremented by every Start: events of an earlier life are ignored.
  [[nodiscard]] std::uint64_t incarnation() const { return incarnation_; }

  // Runs every handler that is ready on this node's clock.
  void Poll();

  [[nodiscard]] NodeId id() const { return options_.raft.id; }
  [[nodiscard]] server::RaftDriver& driver() { return *driver_; }
  [[nodiscard]] server::KvStore& store() { return *store_; }
  [[nodiscard]] SimDurableLog& disk() { return disk_; }
  [[nodiscard]] NodeClock& clock() { return clock_; }

 private:
  NodeShellOptions options_;
  SimDurableLog disk_;  // survives crashes
  NodeClock clock_;
  server::MessageSender& sender_;
  std::uint64_t incarnation_ = 0;
  // The process. Destroyed in reverse: the driver (and its timers) before the io_context.
  std::unique_ptr<asio::io_context> io_;
  std::unique_ptr<server::KvStore> store_;
  std::unique_ptr<server::KvStateMachine> state_machine_;
  std::unique_ptr<server::RaftDriver> driver_;
};

}  // namespace epoch::nodesim
