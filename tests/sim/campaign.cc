#include "campaign.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <thread>

#include "simulation.h"

namespace epoch::sim {

namespace {

// The reproduction command of the seed running on this thread, printed if the process aborts
// (an assertion in the core or the simulator), so that every failing seed can be replayed.
thread_local char g_repro[512];

extern "C" void OnAbort(int signal) {
  static const char kPrefix[] = "\n*** aborted while running a simulation; reproduce with:\n  ";
  if (write(STDERR_FILENO, kPrefix, sizeof kPrefix - 1) < 0) {
  }
  if (write(STDERR_FILENO, g_repro, strnlen(g_repro, sizeof g_repro)) < 0) {
  }
  if (write(STDERR_FILENO, "\n", 1) < 0) {
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

std::once_flag g_install_once;

}  // namespace

SimOptions SeedOptions(const CampaignOptions& campaign, std::uint64_t seed) {
  SimOptions o;
  o.seed = seed;
  o.nodes = campaign.nodes != 0 ? campaign.nodes : (seed % 2 == 0 ? 3 : 5);
  o.steps = campaign.steps;
  o.mutation = campaign.mutation;
  o.verbose = campaign.verbose;
  return o;
}

RunResult RunSeed(const SimOptions& options) {
  std::call_once(g_install_once, [] {
    std::signal(SIGABRT, OnAbort);
    std::signal(SIGSEGV, OnAbort);
  });
  std::string repro = ReproCommand(options);
  std::snprintf(g_repro, sizeof g_repro, "%s", repro.c_str());
  const auto start = std::chrono::steady_clock::now();
  Simulation simulation(options);
  RunResult result = simulation.Run();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::string DescribeFailure(const RunResult& run, const SimOptions& options) {
  std::string out = fmt::format(
      "FAIL seed={} nodes={} mutation={} after {} steps ({:.3f} s "
      "simulated)\n",
      run.seed, run.nodes, MutationName(run.mutation), run.steps,
      static_cast<double>(run.sim_time_us) / 1e6);
  for (const Violation& v : run.violations) {
    out += fmt::format("  [{}] at {:.3f} ms: {}\n", InvariantName(v.invariant),
                       static_cast<double>(v.time_us) / 1000.0, v.what);
  }
  out += fmt::format("  reproduce: {}\n", ReproCommand(options));
  return out;
}

void CampaignResult::Add(const RunResult& run) {
  ++seeds;
  ++(run.nodes == 3 ? seeds3 : seeds5);
  steps += run.steps;
  sim_time_us += run.sim_time_us;
  for (int k = 0; k < kFaultKindCount; ++k) faults[k] += run.faults[k];
  ops_checked += run.ops_checked;
  ops_unknown += run.ops_unknown;
  ops_unknown_dropped += run.ops_unknown_dropped;
  ops_unknown_resolved += run.ops_unknown_resolved;
  serializable_reads += run.serializable_reads;
  lease_reads += run.lease_reads;
  read_index_reads += run.read_index_reads;
  elections += run.elections;
  compactions += run.compactions;
  snapshots_installed += run.snapshots_installed;
  lincheck_max_steps = std::max(lincheck_max_steps, run.lincheck_steps);
  max_liveness_us = std::max(max_liveness_us, run.liveness_leader_us);
  if (run.min_lease_margin_us >= 0 &&
      (min_lease_margin_us < 0 || run.min_lease_margin_us < min_lease_margin_us)) {
    min_lease_margin_us = run.min_lease_margin_us;
  }
  if (run.wall_seconds > slowest_seed_seconds) {
    slowest_seed_seconds = run.wall_seconds;
    slowest_seed = run.seed;
  }
  for (const Violation& v : run.violations) ++violations[static_cast<std::size_t>(v.invariant)];
  if (!run.ok()) failures.push_back(run);
}

std::string CampaignResult::Summary() const {
  std::string out = fmt::format(
      "seeds: {} ({} with 3 nodes, {} with 5), steps: {} ({:.0f} per seed), simulated time: "
      "{:.2f} h, wall: {:.1f} s (slowest seed {}: {:.2f} s)\n",
      seeds, seeds3, seeds5, steps, seeds ? static_cast<double>(steps) / seeds : 0.0,
      static_cast<double>(sim_time_us) / 3.6e9, wall_seconds, slowest_seed, slowest_seed_seconds);
  out += "faults injected:\n";
  for (int k = 0; k < kFaultKindCount; ++k) {
    out += fmt::format("  {:<28}{}\n", FaultKindName(static_cast<FaultKind>(k)), faults[k]);
  }
  out += fmt::format(
      "client ops checked for linearizability: {}; writes with unknown outcome (client timed "
      "out): {} ({} never applied: left out, {} applied: return time = first apply); "
      "serializable reads (not checked): {}\n",
      ops_checked, ops_unknown, ops_unknown_dropped, ops_unknown_resolved, serializable_reads);
  out += fmt::format(
      "linearizable reads served: {} by lease, {} by ReadIndex; max lincheck "
      "steps in one run: {}\n",
      lease_reads, read_index_reads, lincheck_max_steps);
  out += fmt::format("log compactions: {}; snapshots installed by followers: {}\n", compactions,
                     snapshots_installed);
  out += fmt::format(
      "elections (terms with a leader): {}; slowest heal -> committed probe: "
      "{:.1f} ms; min lease margin: {}\n",
      elections, static_cast<double>(max_liveness_us) / 1000.0,
      min_lease_margin_us < 0
          ? std::string("n/a")
          : fmt::format("{:.1f} ms", static_cast<double>(min_lease_margin_us) / 1000.0));
  std::uint64_t total = 0;
  std::string detail;
  for (int i = 0; i < kInvariantCount; ++i) {
    total += violations[i];
    if (violations[i] > 0) {
      detail += fmt::format(" {}={}", InvariantName(static_cast<Invariant>(i)), violations[i]);
    }
  }
  out += fmt::format("violations: {} (failing seeds: {}){}\n", total, failures.size(), detail);
  return out;
}

CampaignResult RunCampaign(const CampaignOptions& options) {
  CampaignResult result;
  std::mutex mu;
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    while (!stop.load()) {
      std::uint64_t i = next.fetch_add(1);
      if (i >= options.count) return;
      SimOptions so = SeedOptions(options, options.first_seed + i);
      RunResult run = RunSeed(so);
      std::lock_guard<std::mutex> lock(mu);
      result.Add(run);
      if (!run.ok()) {
        if (options.print_failures) fmt::print("{}", DescribeFailure(run, so));
        if (options.stop_at_first_failure) stop = true;
      }
    }
  };
  const int jobs = std::max(1, options.jobs);
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> threads;
    for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
  }
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::sort(result.failures.begin(), result.failures.end(),
            [](const RunResult& a, const RunResult& b) { return a.seed < b.seed; });
  return result;
}

std::int64_t FailoverStats::Percentile(double p) const {
  if (samples_us.empty()) return -1;
  auto rank = static_cast<std::size_t>(p * static_cast<double>(samples_us.size() - 1) + 0.5);
  return samples_us[std::min(rank, samples_us.size() - 1)];
}

std::string FailoverStats::Summary() const {
  auto ms = [](std::int64_t us) { return static_cast<double>(us) / 1000.0; };
  const std::string after =
      slow_disk_us > 0
          ? fmt::format(" 0.8-1.2 s after every disk was {} ms slower per write for 1 s",
                        slow_disk_us / 1000)
          : "";
  return fmt::format(
      "{} nodes: {} trials, leader crash{} -> new leader committed in its term: "
      "p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms; no new leader within the "
      "limit: {}",
      nodes, samples_us.size() + static_cast<std::size_t>(no_leader), after, ms(Percentile(0.5)),
      ms(Percentile(0.99)), ms(samples_us.empty() ? -1 : samples_us.back()), no_leader);
}

FailoverStats MeasureFailover(int nodes, int trials, std::uint64_t first_seed,
                              std::int64_t slow_disk_us) {
  FailoverStats stats;
  stats.nodes = nodes;
  stats.slow_disk_us = slow_disk_us;
  for (int t = 0; t < trials; ++t) {
    SimOptions o;
    o.seed = first_seed + static_cast<std::uint64_t>(t);
    o.nodes = nodes;
    std::snprintf(
        g_repro, sizeof g_repro, "sim_runner --failover (seed %llu, %d nodes, slow disk %lld us)",
        static_cast<unsigned long long>(o.seed), nodes, static_cast<long long>(slow_disk_us));
    Simulation simulation(o);
    std::int64_t us = simulation.MeasureFailover(5'000'000, slow_disk_us);
    if (us < 0) {
      ++stats.no_leader;
    } else {
      stats.samples_us.push_back(us);
    }
  }
  std::sort(stats.samples_us.begin(), stats.samples_us.end());
  return stats;
}

}  // namespace epoch::sim
