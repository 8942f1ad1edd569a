// wal_crash_test: the real-process crash test. Repeatedly starts wal_crash_writer on one WAL
// directory under /tmp, SIGKILLs it at a random point (after a random number of acknowledgements,
// after a random delay, or right at start-up during its own recovery), then recovers the WAL in
// this process and checks that
//   - recovery succeeds every time, and
//   - the log equals the reference log after some prefix of the writer's requests that contains
//     every request it acknowledged (printed "A <n>" only after its durability callback).
// The next iteration's writer continues from the recovered log, so crashes accumulate.
//
//   wal_crash_test --iterations 200 [--writer path] [--seed N] [--ops N] [--keep]
//
// Exit 0 when every iteration passed; 1 with the failing iteration and seed otherwise.
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "crash_workload.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/wal/posix_file_system.h"

namespace {

using namespace epoch::wal;
using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kSegmentBytes = 64 * 1024;

struct WriterRun {
  std::vector<std::string> lines;
  bool killed = false;
  int exit_code = -1;
};

enum class KillMode { kAfterAcks, kAfterDelay, kDuringStartup };

// Starts the writer, kills it per `mode`, and returns every complete line it printed.
WriterRun RunWriter(const std::string& writer, const std::string& dir, std::uint64_t seed,
                    std::uint64_t ops, KillMode mode, std::uint64_t acks_to_wait,
                    std::chrono::microseconds delay) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
  const std::string seed_s = std::to_string(seed), ops_s = std::to_string(ops),
                    seg_s = std::to_string(kSegmentBytes);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    const char* args[] = {writer.c_str(), dir.c_str(),   seed_s.c_str(),
                          ops_s.c_str(),  seg_s.c_str(), nullptr};
    ::execv(writer.c_str(), const_cast<char* const*>(args));
    std::_Exit(127);
  }
  ::close(fds[1]);
  WriterRun run;
  std::string buffer;
  std::uint64_t acks = 0;
  const auto start = Clock::now();
  const auto hard_deadline = start + std::chrono::seconds(60);
  bool eof = false;
  auto consume = [&](bool count) {
    for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
      run.lines.push_back(buffer.substr(0, nl));
      if (count && run.lines.back().starts_with("A ")) ++acks;
      buffer.erase(0, nl + 1);
    }
  };
  for (;;) {
    if (mode == KillMode::kAfterAcks && acks >= acks_to_wait) break;
    if (mode != KillMode::kAfterAcks && Clock::now() - start >= delay) break;
    if (Clock::now() > hard_deadline) break;
    int timeout_ms = 100;
    if (mode != KillMode::kAfterAcks) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(delay - (Clock::now() - start));
      timeout_ms = static_cast<int>(std::max<std::int64_t>(0, left.count()));
    }
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) {
      eof = true;
      break;
    }
    buffer.append(chunk, static_cast<std::size_t>(n));
    consume(true);
  }
  if (!eof) {
    ::kill(pid, SIGKILL);
    run.killed = true;
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  // Lines printed before the kill are still in the pipe: they were acknowledged too.
  for (;;) {
    char chunk[4096];
    const ssize_t n = ::read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  consume(false);  // a partial last line (cut by the kill) is ignored
  ::close(fds[0]);
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

Options CheckerOptions() {
  Options o;
  o.segment_bytes = kSegmentBytes;
  o.log = [](LogLevel, std::string_view) {};
  return o;
}

struct Totals {
  std::uint64_t acked = 0;
  std::uint64_t killed = 0;
  std::uint64_t finished = 0;
  std::uint64_t torn_tails = 0;
  std::uint64_t unacked_survivors = 0;  // iterations where more than the acked prefix survived
  std::uint64_t max_segments = 0;
};

// One iteration; returns "" or a failure description.
std::string Iterate(const std::string& writer, const std::string& dir, std::uint64_t seed,
                    std::uint64_t ops, std::mt19937_64& rng, Totals& totals) {
  PosixFileSystem fs;
  testing::RefLog start;
  {
    auto wal = Wal::Open(fs, dir, CheckerOptions());
    if (!wal.ok()) return "open before the writer: " + wal.status().ToString();
    start = testing::FromWal(**wal);
  }
  const auto mode = static_cast<KillMode>(rng() % 3);
  const std::uint64_t acks_to_wait = rng() % 400;
  const auto delay = mode == KillMode::kDuringStartup ? std::chrono::microseconds(rng() % 3000)
                                                      : std::chrono::microseconds(rng() % 400'000);
  const WriterRun run = RunWriter(writer, dir, seed, ops, mode, acks_to_wait, delay);

  std::uint64_t acked = 0;
  for (const std::string& line : run.lines) {
    if (line.starts_with("E ")) return "writer error: " + line;
    if (line.starts_with("R ")) {
      const std::string want =
          fmt::format("R {} {} {} {} {} {} {}", start.first, start.Last(), start.hs.term,
                      start.hs.vote, start.hs.commit, start.snap.index, start.snap.term);
      if (line != want) return fmt::format("writer recovered '{}', checker saw '{}'", line, want);
    }
    if (line.starts_with("A ")) {
      const std::uint64_t n = std::stoull(line.substr(2));
      if (n != acked) return fmt::format("acknowledgement {} out of order (expected {})", n, acked);
      ++acked;
    }
  }
  if (!run.killed && run.exit_code != 0) {
    return fmt::format("writer exited with {} without being killed", run.exit_code);
  }
  totals.acked += acked;
  totals.killed += run.killed ? 1 : 0;
  totals.finished += run.killed ? 0 : 1;

  auto wal = Wal::Open(fs, dir, CheckerOptions());
  if (!wal.ok()) return "recovery after SIGKILL failed: " + wal.status().ToString();
  if ((*wal)->recovery().torn_bytes_dropped > 0) ++totals.torn_tails;
  totals.max_segments = std::max(totals.max_segments, (*wal)->recovery().segments);
  const testing::RefLog recovered = testing::FromWal(**wal);
  testing::Workload workload(seed, start, 1000);
  std::vector<testing::Op> all_ops;
  all_ops.reserve(ops);
  for (std::uint64_t i = 0; i < ops; ++i) all_ops.push_back(workload.Next());
  const std::string diff = testing::CheckPrefix(start, all_ops, acked, recovered);
  if (!diff.empty()) return diff;
  if (!testing::CheckPrefix(start, all_ops, acked + 1, recovered).empty()) {
    // Fine either way; counted to show that unacknowledged requests sometimes survive too.
  } else if (acked < ops) {
    ++totals.unacked_survivors;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wal_crash_test: SIGKILL a WAL writer at random points and check recovery"};
  int iterations = 200;
  std::uint64_t seed = 0;
  std::uint64_t ops = 3000;
  std::string writer;
  bool keep = false;
  app.add_option("--iterations", iterations, "kill/recover cycles")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "master seed (0: from the clock, printed)");
  app.add_option("--ops", ops, "requests per writer run");
  app.add_option("--writer", writer, "path of wal_crash_writer (default: next to this program)");
  app.add_flag("--keep", keep, "keep the WAL directory");
  CLI11_PARSE(app, argc, argv);
  if (writer.empty()) {
    writer = (std::filesystem::path(argv[0]).parent_path() / "wal_crash_writer").string();
  }
  if (seed == 0) seed = static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());

  epoch::test_support::TempDir tmp("epoch-wal-crash");  // throws if it cannot be created
  const std::string dir = tmp.Sub("wal");
  fmt::print("wal_crash_test: {} iterations, seed {}, dir {}\n", iterations, seed, dir);
  std::fflush(stdout);

  std::mt19937_64 rng(seed);
  Totals totals;
  const auto t0 = Clock::now();
  int rc = 0;
  for (int it = 0; it < iterations; ++it) {
    const std::uint64_t run_seed = rng();
    const std::string failure = Iterate(writer, dir, run_seed, ops, rng, totals);
    if (!failure.empty()) {
      fmt::print("FAIL at iteration {} (master seed {}, run seed {}): {}\n", it, seed, run_seed,
                 failure);
      rc = 1;
      keep = true;
      break;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  fmt::print(
      "{}: {} iterations in {:.1f} s; writer killed {} times, finished {} times; {} acknowledged "
      "requests{}; torn tails truncated in {} recoveries; unacknowledged requests survived "
      "in {}; up to {} segments\n",
      rc == 0 ? "PASS" : "FAIL", iterations, secs, totals.killed, totals.finished, totals.acked,
      rc == 0 ? ", 0 lost" : "", totals.torn_tails, totals.unacked_survivors, totals.max_segments);
  if (keep) {
    tmp.Keep();
    fmt::print("kept {}\n", tmp.path());
  }
  return rc;
}
