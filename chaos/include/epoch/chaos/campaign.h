// The chaos campaign: rounds of fault iterations against fresh clusters, every round's histories
// checked, and one report for the whole run.
//
// A round: start an N-node ChaosCluster; start the register, watch and lock workloads; inject
// `faults_per_round` faults one after another (each held, healed, then the cluster must be
// healthy again and the register workload must make progress); stop the workloads; write a marker
// that every watcher must see; check linearizability, serializable reads, watch streams, fencing,
// convergence and that no node died on its own. Round r uses seed `seed + r` for its choices and
// the faults at positions [r*K, r*K + K) of the campaign's schedule (FaultSchedule(seed, ...)), so
// `--seed S --only-round r` re-runs exactly that round's plan.
//
// A failing round keeps its cluster directory (node logs, data, worker logs, the SQLite table) and
// writes history.txt, watch.txt and round.txt there; the report prints its path and the command
// that re-runs it.
//
// Threading: RunCampaign runs on the calling thread (which must outlive every child process).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace epoch::chaos {

struct CampaignOptions {
  std::string epochd_path;
  std::string self_exe;  // this binary, for the worker processes
  int nodes = 3;
  int rounds = 6;
  int faults_per_round = 5;
  std::uint64_t seed = 1;
  int only_round = -1;  // >= 0: run just this round of the campaign
  std::vector<std::string> raft_flags;
  std::vector<std::string> only_faults;            // fault names (faults.h); empty = every kind
  std::chrono::milliseconds check_budget{30'000};  // linearizability search limit per round
  bool require_every_kind = true;  // fail unless every fault kind was injected at least once
  bool client_tls = false;         // https:// client ports (ChaosClusterOptions::client_tls)
  bool peer_tls = false;           // peer mTLS (ChaosClusterOptions::peer_tls); no member-replace
  int snapshot_count = 0;          // epochd --snapshot-count; 0 = its default
};

// Runs the campaign and prints the report. Returns 0 when no checker found a violation (and, if
// required, every fault kind was injected), 1 otherwise.
int RunCampaign(const CampaignOptions& options);

}  // namespace epoch::chaos
