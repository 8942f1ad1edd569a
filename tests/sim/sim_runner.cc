// sim_runner: runs seeded cluster simulations from the command line.
//
//   sim_runner --seed=123 --nodes=5              one seed (prints a trace with --verbose)
//   sim_runner --seed=1 --seeds=100000 --jobs=2  a long campaign (nodes mixed unless --nodes)
//   sim_runner --mutation=lease_without_drift_margin --seeds=200   a deliberate bug must be found
//   sim_runner --failover                        failover-time distribution, 3 and 5 nodes
//
// Exit status: 0 when every seed passed (or, with --mutation, when the bug was caught), 1
// otherwise.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "campaign.h"

namespace {

int RunFailover(int trials, std::uint64_t first_seed, int nodes) {
  using epoch::sim::MeasureFailover;
  bool ok = true;
  for (int n : {3, 5}) {
    if (nodes != 0 && nodes != n) continue;
    // Quiet, and right after a latency fault that raised every node's adaptive timeout.
    for (std::int64_t slow_disk_us : {std::int64_t{0}, epoch::sim::kFailoverSlowDiskUs}) {
      epoch::sim::FailoverStats stats = MeasureFailover(n, trials, first_seed, slow_disk_us);
      fmt::print("{}\n", stats.Summary());
      ok = ok && stats.no_leader == 0;
    }
  }
  fmt::print(
      "timing: tick 10 ms, heartbeat 5 ticks, election floor 15 ticks, jitter 15 ticks "
      "(raft::Config defaults); network 0.1-0.5 ms, disk 0.1-2 ms, clock drift <= 5%\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Epoch seeded cluster simulator"};
  std::uint64_t seed = 1;
  std::uint64_t seeds = 1;
  int nodes = 0;
  std::uint64_t steps = epoch::sim::SimOptions{}.steps;
  std::string mutation = "none";
  bool failover = false;
  int trials = 500;
  int jobs = 1;
  bool verbose = false;
  bool keep_going = false;
  app.add_option("--seed", seed, "first seed");
  app.add_option("--seeds", seeds, "number of seeds to run, from --seed on");
  app.add_option("--nodes", nodes, "cluster size: 3 or 5 (default: mixed by seed parity)")
      ->check(CLI::IsMember({0, 3, 5}));
  app.add_option("--steps", steps, "events in the fault phase of each run");
  app.add_option("--mutation", mutation,
                 "deliberate core bug: none, no_election_restriction, "
                 "commit_prior_term_by_counting, lease_without_drift_margin, "
                 "vote_while_leader_live, reply_before_persist, read_index_without_quorum, "
                 "apply_before_durable, lease_from_own_floor, lower_floor_without_hold");
  app.add_flag("--failover", failover, "measure leader-crash failover time (3 and 5 nodes)");
  app.add_option("--trials", trials, "failover trials per cluster size");
  app.add_option("--jobs", jobs, "worker threads for multi-seed runs");
  app.add_flag("--verbose,-v", verbose, "trace faults and restarts (single seed)");
  app.add_flag("--keep-going", keep_going, "with --mutation: do not stop at the first catch");
  CLI11_PARSE(app, argc, argv);

  if (failover) return RunFailover(trials, seed, nodes);

  std::optional<epoch::sim::Mutation> m = epoch::sim::ParseMutation(mutation);
  if (!m) {
    fmt::print(stderr, "unknown mutation '{}'\n", mutation);
    return 2;
  }
  epoch::sim::CampaignOptions c;
  c.first_seed = seed;
  c.count = seeds;
  c.nodes = nodes;
  c.steps = steps;
  c.mutation = *m;
  c.jobs = jobs;
  c.verbose = verbose && seeds == 1;
  c.stop_at_first_failure = *m != epoch::sim::Mutation::kNone && !keep_going;
  c.print_failures = true;
  fmt::print("simulating seeds {}..{} nodes={} steps={} mutation={}\n", seed, seed + seeds - 1,
             nodes == 0 ? std::string("mixed") : std::to_string(nodes), steps, mutation);
  std::fflush(stdout);
  epoch::sim::CampaignResult r = epoch::sim::RunCampaign(c);
  fmt::print("{}", r.Summary());
  if (*m != epoch::sim::Mutation::kNone) {
    if (r.failures.empty()) {
      fmt::print("mutation {} NOT caught in {} seeds\n", mutation, r.seeds);
      return 1;
    }
    fmt::print("mutation {} caught at seed {} ({} seeds run)\n", mutation, r.failures.front().seed,
               r.seeds);
    return 0;
  }
  return r.failures.empty() ? 0 : 1;
}
