// store_apply_bench: the state machine's CPU per put, without network, Raft or other processes.
// Applies serialized v1::InternalRequest puts through KvStateMachine (parse + KvStore::ApplyBatch,
// the same path the driver takes) in batches, flushing RocksDB every --flush-every entries as log
// compaction does, and prints the process CPU (user + sys, RocksDB's background threads included)
// per put. Made for A/B runs of apply-path changes: it is far less noisy than a cluster benchmark
// on a shared machine.
//
//   store_apply_bench --dir /tmp/x --puts 200000 --keys 1000 --value 256 --batch 32
#include <sys/resource.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "epoch/replication/kv_state_machine.h"
#include "epoch/state/kv_store.h"

namespace {

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// CPU of the calling thread only: the apply path itself, without RocksDB's flush and compaction
// threads (whose share depends on when they happen to run).
double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"KvStateMachine apply cost per put"};
  std::string dir = "/tmp/store_apply_bench";
  long puts = 200000;
  int keys = 1000;
  int value_bytes = 256;
  int batch = 32;
  long flush_every = 5000;
  app.add_option("--dir", dir, "store directory (removed first)");
  app.add_option("--puts", puts, "puts to apply")->check(CLI::Range(1L, 100'000'000L));
  app.add_option("--keys", keys, "distinct keys, written round robin")
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--value", value_bytes, "value bytes")->check(CLI::Range(0, 1 << 20));
  app.add_option("--batch", batch, "entries per apply call")->check(CLI::Range(1, 100'000));
  app.add_option("--flush-every", flush_every, "flush RocksDB every N entries (0: never)")
      ->check(CLI::Range(0L, 100'000'000L));
  CLI11_PARSE(app, argc, argv);

  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  auto store = epoch::server::KvStore::Open(dir, {});
  if (!store.ok()) {
    std::fprintf(stderr, "open %s: %s\n", dir.c_str(), store.status().ToString().c_str());
    return 1;
  }
  epoch::server::KvStateMachine sm(**store);
  const std::string value(static_cast<std::size_t>(value_bytes), 'v');

  const double cpu0 = ProcessCpuSeconds();
  const double thread0 = ThreadCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  long applied = 0;
  long since_flush = 0;
  while (applied < puts) {
    std::vector<epoch::raft::Entry> entries;
    for (int i = 0; i < batch && applied + i < puts; ++i) {
      const long n = applied + i;
      epoch::v1::InternalRequest req;
      req.set_request_id(static_cast<std::uint64_t>(n + 1));
      req.set_cluster_time_ms(n / 100 + 1);
      req.mutable_put()->set_key("bench/put/" + std::to_string(n % keys));
      req.mutable_put()->set_value(value);
      epoch::raft::Entry e;
      e.term = epoch::Term(1);
      e.index = epoch::LogIndex(static_cast<std::uint64_t>(n + 1));
      e.data = req.SerializeAsString();
      entries.push_back(std::move(e));
    }
    std::vector<epoch::server::ApplyOutcome> out = sm.Apply(entries);
    for (const auto& o : out) {
      if (!o.status.ok()) {
        std::fprintf(stderr, "apply: %s\n", o.status.ToString().c_str());
        return 1;
      }
    }
    applied += static_cast<long>(entries.size());
    since_flush += static_cast<long>(entries.size());
    if (flush_every > 0 && since_flush >= flush_every) {
      since_flush = 0;
      if (auto f = (*store)->Flush(); !f.ok()) {
        std::fprintf(stderr, "flush: %s\n", f.status().ToString().c_str());
        return 1;
      }
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = ProcessCpuSeconds() - cpu0;
  const double apply_cpu = ThreadCpuSeconds() - thread0;
  // A restart: open rebuilds the per-key index from every revision record (src/key_index.h).
  store->reset();
  const auto r0 = std::chrono::steady_clock::now();
  auto reopened = epoch::server::KvStore::Open(dir, {});
  const double reopen =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
  if (!reopened.ok()) {
    std::fprintf(stderr, "reopen %s: %s\n", dir.c_str(), reopened.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "{\"puts\":%ld,\"keys\":%d,\"value_bytes\":%d,\"batch\":%d,\"wall_s\":%.3f,"
      "\"cpu_s\":%.3f,\"cpu_us_per_put\":%.2f,\"apply_thread_us_per_put\":%.2f,"
      "\"puts_per_sec\":%.0f,\"reopen_s\":%.3f}\n",
      puts, keys, value_bytes, batch, wall, cpu, cpu * 1e6 / static_cast<double>(puts),
      apply_cpu * 1e6 / static_cast<double>(puts), static_cast<double>(puts) / wall, reopen);
  reopened->reset();
  std::filesystem::remove_all(dir, ec);
  return 0;
}
