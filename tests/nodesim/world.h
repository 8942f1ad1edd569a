// World: one whole-node simulation run. N NodeShells (the production driver and state machine on
// simulated time), the simulator's network (tests/sim SimNetwork: per-link drop, delay, jitter,
// cuts) carrying every Raft message through the peer codec, sequential etcd clients (put, Range,
// serializable Range, Txn, DeleteRange) and a nemesis — all driven from one seed on one thread.
//
// A run: fault phase (clients and faults) → heal (links back, every node restarted) → liveness (a
// write must be acknowledged within 3 × (max election timeout + jitter) + 1 s) → drain →
// convergence (every member at the same applied index holds the same state hash) → the revision
// checker (tests/lincheck CheckRevisions: unique, gap-free revisions; real-time order; every
// Range, delete count and Txn branch equal to the replay of the writes at its header revision).
// Election safety is checked after every poll of a node.
//
// Threading: a World is single-threaded; independent worlds may run on different threads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "epoch/raft/config.h"
#include "epoch/replication/raft_driver.h"

namespace epoch::nodesim {

// kSwarm: the seed draws every knob and a mix of faults (the safety campaign). kLoopback and
// kGeo measure failover and write latency: 5 members, only leader kills (SIGKILL of the leader
// every 2–4 s, restarted after 1 s); kLoopback's links take 50–200 µs one way, kGeo's put the
// members in three regions (2 + 2 + 1) with one-way delays of 10, 40 and 75 ms (±15 % jitter)
// between them and 0.2–0.5 ms inside one.
enum class Profile : std::uint8_t { kSwarm, kLoopback, kGeo };

struct WorldOptions {
  std::uint64_t seed = 1;
  Profile profile = Profile::kSwarm;
  // Simulated length of the fault phase.
  std::int64_t fault_phase_us = 20'000'000;
  // Core mutations (raft::Config::Mutations) every node runs with: a checker must catch each.
  raft::Config::Mutations mutations;
  // The driver's planted bugs.
  server::RaftDriverOptions::Mutations driver_mutations;
  bool verbose = false;
};

struct WorldResult {
  std::uint64_t seed = 0;
  bool ok = true;
  std::string invariant;  // the rule that failed: "revision:<rule>", "election-safety", ...
  std::string detail;
  // The swarm the seed chose.
  int nodes = 0;
  int clients = 0;
  double rho = 0.0;
  std::map<std::string, int> faults;  // kind -> times injected
  std::int64_t simulated_us = 0;
  std::size_t operations = 0;  // in the checked history
  std::size_t writes = 0;
  std::size_t unknown = 0;
  std::uint64_t messages = 0;
  // Power losses of crash-restart (wal::CrashStats): unsynced WAL pages lost or torn, files
  // where a later page survived an earlier lost one.
  std::uint64_t pages_lost = 0;
  std::uint64_t pages_torn = 0;
  std::uint64_t files_reordered = 0;
  std::uint64_t fail_stops = 0;  // members that stopped on a failed fdatasync (disk-eio)
  // Leader kill -> the first acknowledged write a client called after it (µs).
  std::vector<std::int64_t> failovers_us;
  // Call -> acknowledgement of every acknowledged write (µs).
  std::vector<std::int64_t> write_latencies_us;
  std::uint64_t trace = 0;  // a digest of what happened: equal for equal seeds

  [[nodiscard]] std::string Describe() const;
};

[[nodiscard]] WorldResult RunWorld(const WorldOptions& options);

// The planted bugs by name: "node:<name>" for the node's, "<name>" for the Raft core's
// (raft::Config::Mutations). False for an unknown name.
[[nodiscard]] bool SetMutation(const std::string& name, WorldOptions* options);
[[nodiscard]] std::string MutationNames();

}  // namespace epoch::nodesim
