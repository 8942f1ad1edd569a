// Real segment files (PosixFileSystem, under /tmp): a WAL is written once, then copies of it are
// damaged at random (bit flips, zeroed sectors, torn or cut tails) and reopened. Every outcome
// must be a clean refusal (Corruption naming a segment file) or a clean truncation (the log
// equals the reference after some prefix of the requests, and every entry reads back verified)
// -- never a crash and never different data.
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "crash_workload.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/wal/posix_file_system.h"

namespace epoch::wal {
namespace {

namespace fs = std::filesystem;
using test_support::ReadFile;
using test_support::TempDir;
using test_support::WriteFile;
using testing::Callbacks;
using testing::CheckPrefix;
using testing::Op;
using testing::RefLog;

Options TestOptions() {
  Options o;
  o.segment_bytes = 8 * 1024;
  o.cache_bytes_max = 0;  // every read goes to the file and is verified
  o.log = [](LogLevel, std::string_view) {};
  return o;
}

std::vector<fs::path> Segments(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (format::ParseSegmentFileName(e.path().filename().string())) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("bit flips and torn tails in real segment files: refuse or truncate cleanly",
          "[wal][bitflip]") {
  TempDir original("epoch-wal-bitflip");
  PosixFileSystem posix;
  std::vector<Op> ops;
  {
    auto wal = Wal::Open(posix, original.path(), TestOptions());
    REQUIRE(wal.ok());
    // No snapshots here (compaction would leave a single segment); wal_crash_sim_test covers them.
    testing::Workload workload(42, RefLog{}, 400, /*snapshots=*/false);
    Callbacks cb;
    for (int i = 0; i < 400; ++i) {
      ops.push_back(workload.Next());
      REQUIRE(testing::SubmitOp(**wal, ops.back(), cb.Make()).ok());
      if (i % 7 == 0) REQUIRE(cb.Wait(i + 1));  // vary the frame sizes
    }
    REQUIRE(cb.Wait(ops.size()));
    REQUIRE((*wal)->Close().ok());
  }
  const auto segments = Segments(original.path());
  INFO("segments: " << segments.size());
  REQUIRE(segments.size() >= 3);

  std::mt19937_64 rng(7);
  int refused = 0, truncated = 0, intact = 0;
  for (int iter = 0; iter < 300; ++iter) {
    TempDir copy("epoch-wal-bitflip");
    fs::copy(original.path(), copy.path(), fs::copy_options::recursive);
    const auto segs = Segments(copy.path());
    const bool last = rng() % 3 == 0;
    const fs::path victim = last ? segs.back() : segs[rng() % segs.size()];
    std::string image = ReadFile(victim);
    const std::size_t data_end = image.find_last_not_of('\0') + 1;
    const std::size_t at = rng() % (rng() % 4 == 0 ? image.size() : data_end);
    const int mode = static_cast<int>(rng() % 4);
    switch (mode) {
      case 0: image[at] = static_cast<char>(image[at] ^ (1 << (rng() % 8))); break;
      case 1: {  // a lost 512-byte sector
        const std::size_t sector = at / 512 * 512;
        std::fill_n(image.begin() + static_cast<std::ptrdiff_t>(sector),
                    std::min<std::size_t>(512, image.size() - sector), '\0');
        break;
      }
      case 2:  // torn tail: everything after `at` is zero
        std::fill(image.begin() + static_cast<std::ptrdiff_t>(at), image.end(), '\0');
        break;
      default:  // cut file
        image.resize(at);
        break;
    }
    WriteFile(victim, image);

    INFO("iteration " << iter << " mode " << mode << " file " << victim.filename() << " offset "
                      << at);
    auto wal = Wal::Open(posix, copy.path(), TestOptions());
    if (!wal.ok()) {
      CHECK(wal.status().Is(StatusCode::kCorruption));
      CHECK_THAT(wal.status().message(), Catch::Contains(".wal"));
      ++refused;
      continue;
    }
    // Opened: every entry must read back verified, and the log must be a prefix state.
    const LogIndex first = (*wal)->FirstIndex();
    const LogIndex last_index = (*wal)->LastIndex();
    auto entries = (*wal)->TryEntries(first, last_index + 1, UINT64_MAX);
    REQUIRE(entries.ok());
    RefLog got;
    got.hs = (*wal)->InitialHardState();
    got.snap = (*wal)->LastSnapshot();
    got.first = first;
    got.entries = std::move(entries).value();
    const std::string diff = CheckPrefix(RefLog{}, ops, 0, got);
    REQUIRE(diff.empty());
    if (CheckPrefix(RefLog{}, ops, ops.size(), got).empty()) {
      ++intact;
    } else {
      ++truncated;
    }
  }
  WARN("refused " << refused << ", truncated " << truncated << ", intact " << intact);
  CHECK(refused > 0);
  CHECK(intact > 0);
}

}  // namespace
}  // namespace epoch::wal
