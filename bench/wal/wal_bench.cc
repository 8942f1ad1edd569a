// wal_bench: group-commit throughput of wal::Wal next to two physical references measured in the
// same run, in the same directory (so on the same disk and file system):
//   - one fdatasync per 512-byte write (what an fsync-per-request log could do), and
//   - sequential writes with one fdatasync per MiB (roughly the disk's durable bandwidth).
// Then the ceiling for bounded concurrency: one write of (appenders x record) bytes + fdatasync,
// looped. Then appends/s and MB/s with 1, 16, 64 and 256 concurrent appenders, records of 128 B
// and 4 KiB.
// Each appender submits one record and waits for its durability callback, in a loop. Every cell
// runs for a bounded time (--seconds) in a fresh WAL directory that is deleted afterwards.
//
//   wal_bench [--dir /tmp] [--seconds 2.5] [--prealloc zero|fallocate] [--segment-mib 64]
//             [--appenders 1 16 64 256] [--record-bytes 128 4096] [--model-sync-us N]
//             [--waiter semaphore|condvar]
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "epoch/wal/fault_injector.h"
#include "epoch/wal/posix_file_system.h"
#include "epoch/wal/wal.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace wal = epoch::wal;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// --model-sync-us: every fdatasync (the references' and the WAL's) also takes this long. With
// --dir on a tmpfs (where fdatasync itself is free) this is a model disk of fixed sync latency:
// no noise from other tenants of a shared disk, so A/B runs compare the WAL's own overhead.
std::chrono::microseconds g_model_sync{0};

void DataSync(int fd) {
  if (::fdatasync(fd) != 0) std::abort();
  if (g_model_sync.count() > 0) std::this_thread::sleep_for(g_model_sync);
}

// --waiter: how an appender waits for its durability callback. "semaphore" (the default, as
// before): std::binary_semaphore, which in libstdc++ spins with sched_yield before it sleeps -- on
// 2 CPUs, 64+ spinning appenders take CPU from the WAL's own threads. "condvar": a mutex and
// condition variable, which sleeps at once (as a server's request handler waiting on a future).
bool g_condvar_waiter = false;

class DurableWaiter {
 public:
  void Notify() {
    if (!g_condvar_waiter) {
      semaphore_.release();
      return;
    }
    std::lock_guard lock(mu_);
    durable_ = true;
    cv_.notify_one();
  }
  void Wait() {
    if (!g_condvar_waiter) {
      semaphore_.acquire();
      return;
    }
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return durable_; });
    durable_ = false;
  }

 private:
  std::binary_semaphore semaphore_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool durable_ = false;
};

// User + system CPU time of the whole process, in seconds (all threads).
double ProcessCpuSeconds() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto sec = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

std::string FsType(const std::string& dir) {
  struct statfs st {};
  if (::statfs(dir.c_str(), &st) != 0) return "unknown";
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794c7630: return "overlayfs";
    default: return fmt::format("0x{:x}", static_cast<unsigned long>(st.f_type));
  }
}

struct Reference {
  double ops_per_s = 0;
  double mb_per_s = 0;
};

// One fdatasync per 512-byte write: appended to a new file (the brief's reference), or written
// over a preallocated, zero-filled file (no size or extent change to journal: what the WAL does).
Reference FsyncPerWrite(const std::string& dir, double seconds, bool preallocated) {
  const std::string path = dir + "/ref-fsync.dat";
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  if (preallocated) {
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 64; ++i) {
      if (::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(i) << 20) !=
          static_cast<ssize_t>(zeros.size())) {
        std::abort();
      }
    }
    DataSync(fd);
  }
  const std::string block(512, 'x');
  std::uint64_t n = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds && n < (preallocated ? 100'000 : 1'000'000)) {
    if (::pwrite(fd, block.data(), block.size(), static_cast<off_t>(n * block.size())) !=
        static_cast<ssize_t>(block.size())) {
      std::abort();
    }
    DataSync(fd);
    ++n;
  }
  const double elapsed = Seconds(Clock::now() - start);
  ::close(fd);
  ::unlink(path.c_str());
  return Reference{n / elapsed, n * 512.0 / elapsed / 1e6};
}

// The physical ceiling of group commit with a bounded number of records in flight: a loop of one
// `bytes`-sized pwrite + one fdatasync over a preallocated, zero-filled file (what the WAL's frames
// do). With A appenders of R bytes each, at most A x R bytes can be waiting for one sync, so
// A x R / (time of one write + fdatasync of A x R bytes) bounds the WAL's MB/s from above.
Reference WriteAndSyncLoop(const std::string& dir, double seconds, std::size_t bytes) {
  const std::string path = dir + "/ref-ceiling.dat";
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  constexpr std::uint64_t kFileBytes = 256ull << 20;
  const std::string zeros(1 << 20, '\0');
  for (std::uint64_t at = 0; at < kFileBytes; at += zeros.size()) {
    if (::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(at)) !=
        static_cast<ssize_t>(zeros.size())) {
      std::abort();
    }
  }
  DataSync(fd);
  const std::string block(bytes, 'z');
  std::uint64_t n = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds && n < 1'000'000) {
    // Wrap around inside the preallocated file: overwriting keeps every sync a data-only one.
    const std::uint64_t at = (n * bytes) % (kFileBytes - kFileBytes % bytes);
    if (::pwrite(fd, block.data(), block.size(), static_cast<off_t>(at)) !=
        static_cast<ssize_t>(block.size())) {
      std::abort();
    }
    DataSync(fd);
    ++n;
  }
  const double elapsed = Seconds(Clock::now() - start);
  ::close(fd);
  ::unlink(path.c_str());
  return Reference{n / elapsed, n * static_cast<double>(bytes) / elapsed / 1e6};
}

// Sequential 64 KiB writes, one fdatasync per MiB.
Reference SequentialWrites(const std::string& dir, double seconds) {
  const std::string path = dir + "/ref-seq.dat";
  const int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  if (fd < 0) std::abort();
  const std::string chunk(64 * 1024, 'y');
  std::uint64_t bytes = 0;
  const auto start = Clock::now();
  while (Seconds(Clock::now() - start) < seconds && bytes < (4ull << 30)) {
    for (int i = 0; i < 16; ++i) {
      if (::pwrite(fd, chunk.data(), chunk.size(), static_cast<off_t>(bytes)) !=
          static_cast<ssize_t>(chunk.size())) {
        std::abort();
      }
      bytes += chunk.size();
    }
    DataSync(fd);
  }
  const double elapsed = Seconds(Clock::now() - start);
  ::close(fd);
  ::unlink(path.c_str());
  return Reference{bytes / (1024.0 * 1024.0) / elapsed, bytes / elapsed / 1e6};
}

struct Cell {
  int appenders = 0;
  std::size_t record_bytes = 0;
  double appends_per_s = 0;
  double mb_per_s = 0;
  double records_per_frame = 0;
  double frames_per_s = 0;
  double sync_ms = 0;            // mean fdatasync latency of the WAL's frames
  double cpu_us_per_append = 0;  // process CPU (all threads, user + system) per append
  std::uint64_t prealloc_waits = 0;
};

Cell RunCell(const std::string& dir, int appenders, std::size_t record_bytes, double seconds,
             const wal::Options& options) {
  wal::PosixFileSystem fs;
  if (g_model_sync.count() > 0) {
    auto model = std::make_shared<wal::FaultInjector>();
    model->SetDelay(wal::FsOp::kSync, g_model_sync);
    fs.SetFaultHook(model);
  }
  std::atomic<std::uint64_t> sync_ns{0};
  wal::Options opts = options;
  opts.on_sync = [&sync_ns](const wal::SyncEvent& e) {
    sync_ns.fetch_add(static_cast<std::uint64_t>(e.sync_duration.count()),
                      std::memory_order_relaxed);
  };
  auto opened = wal::Wal::Open(fs, dir, opts);
  if (!opened.ok()) {
    fmt::print(stderr, "open: {}\n", opened.status().ToString());
    std::abort();
  }
  std::unique_ptr<wal::Wal> log = std::move(opened).value();
  // Raft indexes are assigned in order; the driver is one thread. Here many threads share an
  // index counter under a mutex held only around the (non-blocking) Append call.
  std::mutex index_mu;
  std::uint64_t next_index = 1;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> completed{0};
  const std::string payload(record_bytes, 'r');

  auto appender = [&] {
    DurableWaiter durable;
    while (!stop.load(std::memory_order_relaxed)) {
      {
        std::lock_guard lock(index_mu);
        const epoch::LogIndex index(next_index++);
        const epoch::Status s = log->Append(
            {epoch::raft::Entry{epoch::Term(1), index, epoch::raft::EntryType::kNormal, payload}},
            std::nullopt, [&durable](const epoch::Status& st) {
              if (!st.ok()) std::abort();  // the benchmark disk must not fail
              durable.Notify();
            });
        if (!s.ok()) std::abort();
      }
      durable.Wait();
      completed.fetch_add(1, std::memory_order_relaxed);
    }
  };
  const double cpu_start = ProcessCpuSeconds();
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < appenders; ++i) threads.emplace_back(appender);
  while (Seconds(Clock::now() - start) < seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the measuring window
  }
  stop = true;
  for (auto& t : threads) t.join();
  const double elapsed = Seconds(Clock::now() - start);
  const double cpu = ProcessCpuSeconds() - cpu_start;
  const wal::WalStats stats = log->stats();
  if (!log->Close().ok()) std::abort();
  Cell cell;
  cell.appenders = appenders;
  cell.record_bytes = record_bytes;
  cell.appends_per_s = completed.load() / elapsed;
  cell.mb_per_s = completed.load() * static_cast<double>(record_bytes) / elapsed / 1e6;
  cell.frames_per_s = stats.frames / elapsed;
  cell.records_per_frame =
      stats.frames == 0 ? 0 : static_cast<double>(stats.records) / stats.frames;
  cell.prealloc_waits = stats.prealloc_waits;
  cell.cpu_us_per_append = completed.load() == 0 ? 0 : cpu * 1e6 / completed.load();
  cell.sync_ms = stats.frames == 0 ? 0 : sync_ns.load() / 1e6 / static_cast<double>(stats.frames);
  return cell;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wal_bench: WAL group-commit throughput vs. the disk's own fsync and bandwidth"};
  std::string base = "/tmp";
  double seconds = 2.5;
  std::string prealloc = "zero";
  std::uint64_t segment_mib = 64;
  std::vector<int> appender_counts{1, 16, 64, 256};
  std::vector<std::size_t> record_sizes{128, 4096};
  app.add_option("--dir", base, "directory on the disk to measure");
  app.add_option("--seconds", seconds, "duration of each cell")->check(CLI::Range(0.1, 30.0));
  app.add_option("--prealloc", prealloc, "segment preallocation: zero or fallocate")
      ->check(CLI::IsMember({"zero", "fallocate"}));
  app.add_option("--segment-mib", segment_mib, "segment size in MiB");
  app.add_option("--appenders", appender_counts, "appender counts to run (default 1 16 64 256)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--record-bytes", record_sizes, "record sizes to run (default 128 4096)")
      ->check(CLI::Range(1, 1 << 20));
  std::int64_t model_sync_us = 0;
  app.add_option("--model-sync-us", model_sync_us,
                 "model disk: every fdatasync also sleeps this long (use with a tmpfs --dir)")
      ->check(CLI::Range(0, 1'000'000));
  std::string waiter = "semaphore";
  app.add_option("--waiter", waiter, "how appenders wait: semaphore or condvar")
      ->check(CLI::IsMember({"semaphore", "condvar"}));
  CLI11_PARSE(app, argc, argv);
  g_condvar_waiter = waiter == "condvar";
  g_model_sync = std::chrono::microseconds(model_sync_us);

  std::string templ = base + "/epoch-wal-bench-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) {
    std::perror("mkdtemp");
    return 2;
  }
  wal::Options options;
  options.segment_bytes = segment_mib << 20;
  options.prealloc_mode =
      prealloc == "zero" ? wal::PreallocMode::kZeroFill : wal::PreallocMode::kFallocate;

  fmt::print(
      "wal_bench: dir {} ({}), {:.1f} s per cell, {} MiB segments, prealloc {}, appenders wait "
      "on a {}, {} CPUs\n",
      templ, FsType(templ), seconds, segment_mib, prealloc, waiter,
      std::thread::hardware_concurrency());
  if (model_sync_us > 0) {
    fmt::print("model disk: every fdatasync also sleeps {} us (references included)\n",
               model_sync_us);
  }
  const Reference fsync_ref = FsyncPerWrite(templ, seconds, /*preallocated=*/false);
  const Reference overwrite_ref = FsyncPerWrite(templ, seconds, /*preallocated=*/true);
  const Reference seq_ref = SequentialWrites(templ, seconds);
  fmt::print("reference: fdatasync per 512 B write (appending): {:.0f} writes/s\n",
             fsync_ref.ops_per_s);
  fmt::print("reference: fdatasync per 512 B write (over a preallocated file): {:.0f} writes/s\n",
             overwrite_ref.ops_per_s);
  fmt::print("reference: sequential writes, fdatasync per MiB: {:.1f} MB/s\n", seq_ref.mb_per_s);
  // The ceiling of each cell whose records in flight fill at least 64 KiB (see WriteAndSyncLoop).
  std::map<std::size_t, Reference> ceilings;
  for (std::size_t record_bytes : record_sizes) {
    for (int appenders : appender_counts) {
      const std::size_t bytes = record_bytes * static_cast<std::size_t>(appenders);
      if (bytes < (64u << 10) || ceilings.count(bytes) != 0) continue;
      ceilings[bytes] = WriteAndSyncLoop(templ, seconds, bytes);
      fmt::print(
          "ceiling: one {} KiB write + fdatasync, looped (preallocated file): {:.0f} syncs/s, "
          "{:.1f} MB/s = {:.0f} % of sequential\n",
          bytes >> 10, ceilings[bytes].ops_per_s, ceilings[bytes].mb_per_s,
          100.0 * ceilings[bytes].mb_per_s / seq_ref.mb_per_s);
    }
  }

  fmt::print(
      "\n| appenders | record | appends/s | MB/s | x fsync ref (append / prealloc) | "
      "% seq MB/s | % ceiling | frames/s | records/frame | mean fdatasync | CPU/append | "
      "prealloc waits |\n");
  fmt::print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::size_t record_bytes : record_sizes) {
    for (int appenders : appender_counts) {
      const std::string dir = templ + fmt::format("/wal-{}-{}", appenders, record_bytes);
      const Cell c = RunCell(dir, appenders, record_bytes, seconds, options);
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
      const auto ceiling = ceilings.find(record_bytes * static_cast<std::size_t>(appenders));
      const std::string of_ceiling =
          ceiling == ceilings.end()
              ? "-"
              : fmt::format("{:.0f} %", 100.0 * c.mb_per_s / ceiling->second.mb_per_s);
      fmt::print(
          "| {} | {} B | {:.0f} | {:.2f} | {:.1f} / {:.1f} | {:.0f} % | {} | {:.0f} | {:.1f} | "
          "{:.2f} ms | {:.1f} us | {} |\n",
          c.appenders, c.record_bytes, c.appends_per_s, c.mb_per_s,
          c.appends_per_s / fsync_ref.ops_per_s, c.appends_per_s / overwrite_ref.ops_per_s,
          100.0 * c.mb_per_s / seq_ref.mb_per_s, of_ceiling, c.frames_per_s, c.records_per_frame,
          c.sync_ms, c.cpu_us_per_append, c.prealloc_waits);
      std::fflush(stdout);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(templ, ec);
  return 0;
}
