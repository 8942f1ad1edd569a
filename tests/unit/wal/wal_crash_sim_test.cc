// Randomized crash test on the simulated disk: a Raft-shaped workload (appends, conflicts,
// hard states, snapshots with compaction) on small segments, crashed at random points by
// SimFileSystem::CrashRandom (any subset of the dirty pages, torn pages, a subset of the unsynced
// names; wal/README.md "Power loss"). After every crash the WAL must
// open, and equal the reference log after some prefix of the submitted requests that contains
// every acknowledged one (crash_workload.h).
#include <catch2/catch.hpp>
#include <random>

#include "crash_workload.h"
#include "epoch/wal/fault_injector.h"
#include "epoch/wal/sim_file_system.h"

namespace epoch::wal {
namespace {

using testing::Callbacks;
using testing::CheckPrefix;
using testing::FromWal;
using testing::Op;
using testing::RefLog;
using testing::Workload;

constexpr const char* kDir = "/node/wal";

enum class CrashMode { kStalledSync, kRunning, kStalledRollover };

// Runs `rounds` crash/recover cycles from one seed. Returns "" or a failure description.
std::string RunSeed(std::uint64_t seed, int rounds) {
  std::mt19937_64 rng(seed);
  SimFileSystem fs;
  auto faults = std::make_shared<FaultInjector>();
  fs.SetFaultHook(faults);
  Options options;
  options.segment_bytes = 2048 + (rng() % 4) * 1024;
  options.cache_bytes_max = rng() % 2 == 0 ? 0 : 4096;
  options.log = [](LogLevel, std::string_view) {};

  auto opened = Wal::Open(fs, kDir, options);
  if (!opened.ok()) return "initial open: " + opened.status().ToString();
  std::unique_ptr<Wal> wal = std::move(opened).value();
  for (int round = 0; round < rounds; ++round) {
    const RefLog start = FromWal(*wal);
    Workload workload(rng(), start, 200);
    std::vector<Op> ops;
    Callbacks acked_cb;
    const std::size_t acked = rng() % 15;
    for (std::size_t i = 0; i < acked; ++i) {
      ops.push_back(workload.Next());
      if (Status s = testing::SubmitOp(*wal, ops.back(), acked_cb.Make()); !s.ok()) {
        return "submit: " + s.ToString();
      }
      if (!acked_cb.Wait(i + 1)) return "no callback";
      if (!acked_cb.Statuses()[i].ok()) return "not durable: " + acked_cb.Statuses()[i].ToString();
    }
    const auto mode = static_cast<CrashMode>(rng() % 3);
    if (mode == CrashMode::kStalledSync) faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
    if (mode == CrashMode::kStalledRollover) faults->Stall(FsOp::kSyncDir);
    Callbacks lost_cb;
    const std::size_t unacked = 1 + rng() % 8;
    for (std::size_t i = 0; i < unacked; ++i) {
      ops.push_back(workload.Next());
      if (Status s = testing::SubmitOp(*wal, ops.back(), lost_cb.Make()); !s.ok()) {
        return "submit: " + s.ToString();
      }
    }
    if (mode == CrashMode::kStalledSync && !faults->AwaitBlocked(1, testing::kWaitTimeout)) {
      return "sync never started";
    }
    // kRunning: crash wherever the sync thread happens to be. kStalledRollover: if a rollover
    // is waiting for its directory sync (or compaction for its sync after a deletion), the crash
    // lands there.
    fs.CrashRandom(rng());
    faults->Clear();
    wal.reset();
    fs.Restart();

    auto reopened = Wal::Open(fs, kDir, options);
    if (!reopened.ok()) {
      return fmt::format("round {} (mode {}): open after crash: {}", round, static_cast<int>(mode),
                         reopened.status().ToString());
    }
    wal = std::move(reopened).value();
    const std::string diff = CheckPrefix(start, ops, acked, FromWal(*wal));
    if (!diff.empty()) {
      return fmt::format("round {} (mode {}): {}", round, static_cast<int>(mode), diff);
    }
  }
  return "";
}

TEST_CASE("crash sim: random crashes never lose an acknowledged request", "[wal][crash]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const std::string failure = RunSeed(seed, 4);
    INFO("seed " << seed << ": " << failure);
    REQUIRE(failure.empty());
  }
}

TEST_CASE("crash sim soak: many more seeds", "[.][soak][wal]") {
  for (std::uint64_t seed = 1000; seed < 6000; ++seed) {
    const std::string failure = RunSeed(seed, 6);
    INFO("seed " << seed << ": " << failure);
    REQUIRE(failure.empty());
  }
}

}  // namespace
}  // namespace epoch::wal
