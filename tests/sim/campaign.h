// Campaigns: many seeded runs with aggregated figures (what sim_runner prints and sim_tests
// asserts on), and the failover-time measurement.
//
// Who uses it: sim_runner, sim_tests.
//
// Threading: RunCampaign may use `jobs` worker threads, each running independent Simulations;
// results are merged under a mutex. Everything else is single-threaded.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace epoch::sim {

struct CampaignOptions {
  std::uint64_t first_seed = 1;
  std::uint64_t count = 1;
  int nodes = 0;  // 3 or 5; 0 = mixed (even seeds 3 nodes, odd seeds 5)
  std::uint64_t steps = SimOptions{}.steps;
  Mutation mutation = Mutation::kNone;
  int jobs = 1;
  bool stop_at_first_failure = false;
  bool verbose = false;
  bool print_failures = true;  // print each failing seed (with its reproduction command) at once
};

struct CampaignResult {
  std::uint64_t seeds = 0;
  std::uint64_t seeds3 = 0;
  std::uint64_t seeds5 = 0;
  std::uint64_t steps = 0;
  std::int64_t sim_time_us = 0;
  std::array<std::uint64_t, kFaultKindCount> faults{};
  std::uint64_t ops_checked = 0;
  std::uint64_t ops_unknown = 0;
  std::uint64_t ops_unknown_dropped = 0;
  std::uint64_t ops_unknown_resolved = 0;
  std::uint64_t serializable_reads = 0;
  std::uint64_t lease_reads = 0;
  std::uint64_t read_index_reads = 0;
  std::uint64_t elections = 0;
  std::uint64_t compactions = 0;
  std::uint64_t snapshots_installed = 0;
  std::uint64_t lincheck_max_steps = 0;
  std::int64_t max_liveness_us = 0;
  std::int64_t min_lease_margin_us = -1;
  std::array<std::uint64_t, kInvariantCount> violations{};
  std::vector<RunResult> failures;  // runs with at least one violation
  double wall_seconds = 0;
  double slowest_seed_seconds = 0;
  std::uint64_t slowest_seed = 0;

  void Add(const RunResult& run);
  [[nodiscard]] std::string Summary() const;
};

[[nodiscard]] SimOptions SeedOptions(const CampaignOptions& campaign, std::uint64_t seed);
// Runs one seed with an abort guard: if the core (or the simulator) aborts, the reproduction
// command is printed first.
[[nodiscard]] RunResult RunSeed(const SimOptions& options);
[[nodiscard]] std::string DescribeFailure(const RunResult& run, const SimOptions& options);
CampaignResult RunCampaign(const CampaignOptions& options);

struct FailoverStats {
  int nodes = 0;
  std::vector<std::int64_t> samples_us;  // sorted
  int no_leader = 0;                     // trials with no new leader within the limit
  std::int64_t slow_disk_us = 0;         // > 0: the crash came after a slow-disk fault
  [[nodiscard]] std::int64_t Percentile(double p) const;
  [[nodiscard]] std::string Summary() const;
};
// The slow-disk fault before a failover measurement: 100 ms per write raises every node's
// adaptive election timeout to 40+ ticks (4 x the persist latency).
inline constexpr std::int64_t kFailoverSlowDiskUs = 100'000;
// `trials` runs with seeds first_seed.. of a fault-free cluster whose leader crashes once (with
// `slow_disk_us` > 0: about a second after every disk was that much slower per write for 1 s).
FailoverStats MeasureFailover(int nodes, int trials, std::uint64_t first_seed,
                              std::int64_t slow_disk_us = 0);

}  // namespace epoch::sim
