// wal_crash_writer: the victim of the real-process crash test (crash_test_main.cc).
//
//   wal_crash_writer <dir> <seed> <ops> <segment_bytes>
//
// Opens the WAL in <dir> (recovering it), prints "R <state>", then submits <ops> requests of the
// deterministic Workload(seed, recovered state) with up to 64 in flight, like a Raft driver that
// keeps stepping while syncs are in flight. Each durability callback prints "A <op number>" with
// one write(2) -- only after the request is durable. wal_crash_test SIGKILLs it at random points.
#include <fmt/format.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>

#include "crash_workload.h"
#include "epoch/wal/posix_file_system.h"

namespace {

void WriteLine(const std::string& line) {
  std::string s = line + "\n";
  const char* p = s.data();
  std::size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n <= 0) std::_Exit(3);  // the test went away
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace epoch::wal;
  if (argc != 5) {
    fmt::print(stderr, "usage: wal_crash_writer <dir> <seed> <ops> <segment_bytes>\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  const std::uint64_t ops = std::strtoull(argv[3], nullptr, 10);
  Options options;
  options.segment_bytes = std::strtoull(argv[4], nullptr, 10);
  options.cache_bytes_max = 256 * 1024;
  options.log = [](LogLevel, std::string_view m) { fmt::print(stderr, "writer: {}\n", m); };

  PosixFileSystem fs;
  auto wal = Wal::Open(fs, dir, options);
  if (!wal.ok()) {
    WriteLine("E " + wal.status().ToString());
    return 1;
  }
  const testing::RefLog start = testing::FromWal(**wal);
  WriteLine(fmt::format("R {} {} {} {} {} {} {}", start.first, start.Last(), start.hs.term,
                        start.hs.vote, start.hs.commit, start.snap.index, start.snap.term));

  testing::Workload workload(seed, start, 1000);
  std::mutex mu;
  std::condition_variable cv;
  std::uint64_t in_flight = 0;
  bool failed = false;
  for (std::uint64_t i = 0; i < ops; ++i) {
    {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return in_flight < 64 || failed; });
      if (failed) break;
      ++in_flight;
    }
    const testing::Op op = workload.Next();
    auto done = [&, i](const epoch::Status& s) {
      if (s.ok()) {
        WriteLine(fmt::format("A {}", i));
      } else {
        WriteLine("E " + s.ToString());
      }
      std::lock_guard lock(mu);
      --in_flight;
      failed |= !s.ok();
      cv.notify_all();
    };
    if (epoch::Status s = testing::SubmitOp(**wal, op, done); !s.ok()) {
      WriteLine("E submit: " + s.ToString());
      return 1;
    }
  }
  const epoch::Status closed = (*wal)->Close();
  WriteLine(closed.ok() ? "D" : "E close: " + closed.ToString());
  return closed.ok() && !failed ? 0 : 1;
}
