// nodesim_runner: whole-node simulation campaigns (tests/nodesim/README.md).
//   nodesim_runner --seeds 1000 --jobs 2            seeds 1..1000 on two threads
//   nodesim_runner --first 4242 --seeds 1 --verbose one seed, every detail
// Exit 0 only when every seed passed.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "world.h"

int main(int argc, char** argv) {
  CLI::App app{"Epoch whole-node simulator: seeded runs of the production node logic"};
  std::uint64_t first = 1;
  std::uint64_t seeds = 100;
  unsigned jobs = 1;
  std::int64_t fault_phase_ms = 20'000;
  bool verbose = false;
  std::string mutation;
  std::string profile = "swarm";
  app.add_option("--first", first, "first seed");
  app.add_option("--seeds", seeds, "number of seeds");
  app.add_option("--jobs", jobs, "threads (independent seeds)");
  app.add_option("--fault-phase-ms", fault_phase_ms, "simulated length of each fault phase");
  app.add_flag("--verbose", verbose, "print every seed's line");
  app.add_option("--profile", profile,
                 "swarm (safety campaign), loopback or geo (failover and write latency of 5 "
                 "members under leader kills)")
      ->check(CLI::IsMember({"swarm", "loopback", "geo"}));
  app.add_option("--mutation", mutation,
                 "run every node with this planted bug (" + epoch::nodesim::MutationNames() + ")");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(verbose && seeds == 1 ? spdlog::level::info : spdlog::level::off);

  std::atomic<std::uint64_t> next{first};
  std::mutex mu;
  std::map<std::string, long> faults;
  std::int64_t simulated_us = 0;
  std::vector<std::int64_t> failovers;
  std::vector<std::int64_t> latencies;
  std::size_t ops = 0, writes = 0, unknown = 0, failed = 0;
  const auto start = std::chrono::steady_clock::now();
  auto work = [&] {
    for (;;) {
      const std::uint64_t seed = next.fetch_add(1);
      if (seed >= first + seeds) return;
      epoch::nodesim::WorldOptions options;
      options.seed = seed;
      options.fault_phase_us = fault_phase_ms * 1000;
      options.profile = profile == "geo"        ? epoch::nodesim::Profile::kGeo
                        : profile == "loopback" ? epoch::nodesim::Profile::kLoopback
                                                : epoch::nodesim::Profile::kSwarm;
      if (!mutation.empty() && !epoch::nodesim::SetMutation(mutation, &options)) {
        fmt::print(stderr, "unknown mutation {}\n", mutation);
        std::exit(2);
      }
      const epoch::nodesim::WorldResult r = epoch::nodesim::RunWorld(options);
      std::lock_guard lock(mu);
      for (const auto& [kind, n] : r.faults) faults[kind] += n;
      simulated_us += r.simulated_us;
      ops += r.operations;
      writes += r.writes;
      unknown += r.unknown;
      failovers.insert(failovers.end(), r.failovers_us.begin(), r.failovers_us.end());
      latencies.insert(latencies.end(), r.write_latencies_us.begin(), r.write_latencies_us.end());
      if (!r.ok) {
        ++failed;
        fmt::print(
            "{}\n  re-run: nodesim_runner --first {} --seeds 1 --fault-phase-ms {} --verbose\n",
            r.Describe(), seed, fault_phase_ms);
      } else if (verbose) {
        fmt::print("{} (trace {:016x})\n", r.Describe(), r.trace);
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned j = 0; j < std::max(1U, jobs); ++j) threads.emplace_back(work);
  for (auto& t : threads) t.join();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "{} seeds from {}: {} violations; {:.2f} simulated hours in {:.0f} s; {} operations "
      "checked ({} writes, {} unknown)\nfaults:",
      seeds, first, failed, static_cast<double>(simulated_us) / 3.6e9, wall, ops, writes, unknown);
  for (const auto& [kind, n] : faults) fmt::print(" {}={}", kind, n);
  fmt::print("\n");
  auto quantiles = [](std::vector<std::int64_t> v, const char* what) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
      return static_cast<double>(v[std::min(
                 v.size() - 1, static_cast<std::size_t>(q * static_cast<double>(v.size())))]) /
             1000.0;
    };
    fmt::print("{} ({}): p50 {:.1f} ms, p99 {:.1f} ms, max {:.1f} ms\n", what, v.size(), at(0.5),
               at(0.99), static_cast<double>(v.back()) / 1000.0);
  };
  quantiles(failovers, "failover (leader kill -> first acknowledged write called after it)");
  quantiles(latencies, "write latency (call -> acknowledgement)");
  return failed == 0 ? 0 : 1;
}
