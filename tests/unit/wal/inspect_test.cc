// The epoch-wal tool's library: verify/dump (Inspect) and repair --truncate-after-corruption
// (PlanRepair / ExecuteRepair), on the simulated file system.
#include "epoch/wal/inspect.h"

#include <catch2/catch.hpp>

#include "epoch/wal/format.h"
#include "epoch/wal/sim_file_system.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using testing::AppendDurably;
using testing::MakeEntries;
using testing::MakeEntry;
using testing::ReadAll;

constexpr const char* kDir = "/n1/wal";

std::string SegPath(std::uint64_t seq) {
  return std::string(kDir) + "/" + format::SegmentFileName(seq);
}

Options Opts() {
  Options o;
  o.segment_bytes = 2048;
  o.log = [](LogLevel, std::string_view) {};
  return o;
}

// Three or more segments of 3-entry frames (entries of 100 bytes, term 1), closed.
std::uint64_t BuildWal(SimFileSystem& fs) {
  auto wal = Wal::Open(fs, kDir, Opts());
  REQUIRE(wal.ok());
  std::uint64_t next = 1;
  while ((*wal)->stats().rollovers < 3) {
    REQUIRE(AppendDurably(**wal, MakeEntries(next, next + 2, 1, 100),
                          raft::HardState{Term(1), NodeId(1), LogIndex(next)})
                .ok());
    next += 3;
  }
  REQUIRE((*wal)->Close().ok());
  return next - 1;
}

TEST_CASE("inspect: an intact WAL verifies and dumps every record", "[wal][tool]") {
  SimFileSystem fs;
  const std::uint64_t last = BuildWal(fs);
  std::uint64_t entries = 0, checkpoints = 0;
  auto report =
      Inspect(fs, kDir, [&](std::uint64_t, std::uint64_t, const format::DecodedRecord& r) {
        entries += std::holds_alternative<raft::Entry>(r.body) ? 1 : 0;
        checkpoints += std::holds_alternative<format::Checkpoint>(r.body) ? 1 : 0;
      });
  REQUIRE(report.ok());
  CHECK(report->status.ok());
  CHECK(report->last_index == LogIndex(last));
  CHECK(entries == last);
  CHECK(checkpoints == report->segments.size() - 1 + (report->segments.back().frames > 0));
  auto plan = PlanRepair(fs, kDir);
  REQUIRE(plan.ok());
  CHECK_FALSE(plan->needed);
}

TEST_CASE("repair: cut at the first corruption, keep evidence, then the WAL opens", "[wal][tool]") {
  SimFileSystem fs;
  const std::uint64_t last = BuildWal(fs);
  // Damage the first frame of segment 2 (valid frames follow it).
  const std::string seg2 = *fs.DurableContents(SegPath(2));
  fs.CorruptDurable(SegPath(2), 200, std::string(1, static_cast<char>(seg2[200] ^ 0x40)));
  REQUIRE_FALSE(Wal::Open(fs, kDir, Opts()).ok());

  auto report = Inspect(fs, kDir);
  REQUIRE(report.ok());
  CHECK(report->status.Is(StatusCode::kCorruption));
  REQUIRE(report->damage_path == std::optional<std::string>(SegPath(2)));
  auto plan = PlanRepair(fs, kDir);
  REQUIRE(plan.ok());
  REQUIRE(plan->needed);
  REQUIRE(plan->possible);
  CHECK(plan->damaged_path == SegPath(2));
  CHECK(plan->cut_offset == format::kSegmentHeaderBytes);
  CHECK(plan->moved_aside.size() >= 2);
  CHECK(plan->entries_dropped > 0);
  CHECK(plan->max_index_dropped == LogIndex(last));
  const std::string text = plan->Describe();
  CHECK_THAT(text, Catch::Contains("cut " + SegPath(2)));
  CHECK_THAT(text, Catch::Contains("WARNING"));

  REQUIRE(ExecuteRepair(fs, kDir, *plan).ok());
  CHECK(fs.Exists(SegPath(2) + ".broken"));
  CHECK(fs.Exists(SegPath(3) + ".broken"));
  auto wal = Wal::Open(fs, kDir, Opts());
  REQUIRE(wal.ok());
  CHECK((*wal)->LastIndex() == plan->last_index_after);
  const auto all = ReadAll(**wal);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == MakeEntry(i + 1, 1, 100));
  // The repaired WAL takes new appends.
  REQUIRE(AppendDurably(**wal, MakeEntries(all.size() + 1, all.size() + 5, 2, 10)).ok());
}

TEST_CASE("repair: a missing segment moves the later ones aside", "[wal][tool]") {
  SimFileSystem fs;
  BuildWal(fs);
  const std::string seg1 = *fs.DurableContents(SegPath(1));
  REQUIRE(fs.Remove(SegPath(2)).ok());
  auto plan = PlanRepair(fs, kDir);
  REQUIRE(plan.ok());
  REQUIRE(plan->possible);
  CHECK(plan->damaged_path.empty());
  CHECK(plan->moved_aside.front() == SegPath(3));
  REQUIRE(ExecuteRepair(fs, kDir, *plan).ok());
  auto wal = Wal::Open(fs, kDir, Opts());
  REQUIRE(wal.ok());
  CHECK((*wal)->LastIndex() == plan->last_index_after);
  CHECK((*wal)->LastIndex() > LogIndex(0));
}

TEST_CASE("repair: a dry run changes nothing", "[wal][tool]") {
  SimFileSystem fs;
  BuildWal(fs);
  fs.CorruptDurable(SegPath(1), 100, "\x7f");
  const std::string before = *fs.DurableContents(SegPath(1));
  auto plan = PlanRepair(fs, kDir);
  REQUIRE(plan.ok());
  CHECK(plan->needed);
  CHECK(*fs.DurableContents(SegPath(1)) == before);
  CHECK_FALSE(Wal::Open(fs, kDir, Opts()).ok());
}

}  // namespace
}  // namespace epoch::wal
