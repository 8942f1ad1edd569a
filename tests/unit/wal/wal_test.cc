// wal::Wal's API on the simulated file system: appends and reads, reopen, conflicts, snapshots,
// compaction, rollover, the entry cache, group commit, and argument checking.
#include "epoch/wal/wal.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "epoch/wal/fault_injector.h"
#include "epoch/wal/format.h"
#include "epoch/wal/sim_file_system.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using testing::AppendDurably;
using testing::Callbacks;
using testing::MakeEntries;
using testing::MakeEntry;
using testing::ReadAll;
using testing::SnapshotDurably;

constexpr const char* kDir = "/data/wal";

Options SmallSegments(std::uint64_t segment_bytes = 4096) {
  Options o;
  o.segment_bytes = segment_bytes;
  o.log = [](LogLevel, std::string_view) {};
  return o;
}

std::unique_ptr<Wal> OpenOk(FileSystem& fs, Options options = SmallSegments()) {
  auto wal = Wal::Open(fs, kDir, std::move(options));
  INFO(wal.status().ToString());
  REQUIRE(wal.ok());
  return std::move(wal).value();
}

std::size_t SegmentCount(SimFileSystem& fs) {
  auto names = fs.ListDir(kDir);
  REQUIRE(names.ok());
  std::size_t n = 0;
  for (const auto& name : *names) n += format::ParseSegmentFileName(name).has_value() ? 1 : 0;
  return n;
}

TEST_CASE("wal: a new WAL is empty and follows the LogReader contract", "[wal]") {
  SimFileSystem fs;
  auto wal = OpenOk(fs);
  CHECK(wal->FirstIndex() == LogIndex(1));
  CHECK(wal->LastIndex() == LogIndex(0));
  CHECK(wal->TermAt(LogIndex(0)) == std::optional<Term>(Term(0)));
  CHECK_FALSE(wal->TermAt(LogIndex(1)).has_value());
  CHECK(wal->InitialHardState().IsEmpty());
  CHECK(wal->LastSnapshot().IsEmpty());
  CHECK(wal->Entries(LogIndex(1), LogIndex(1), 100).empty());
  CHECK(fs.Exists(std::string(kDir) + "/0000000000000001.wal"));
}

TEST_CASE("wal: appended entries and hard state read back, before and after reopen", "[wal]") {
  SimFileSystem fs;
  const raft::HardState hs{Term(2), NodeId(3), LogIndex(4)};
  {
    auto wal = OpenOk(fs);
    REQUIRE(AppendDurably(*wal, MakeEntries(1, 5, 1)).ok());
    REQUIRE(AppendDurably(*wal, MakeEntries(6, 10, 2), hs).ok());
    CHECK(wal->LastIndex() == LogIndex(10));
    CHECK(wal->TermAt(LogIndex(5)) == std::optional<Term>(Term(1)));
    CHECK(wal->TermAt(LogIndex(6)) == std::optional<Term>(Term(2)));
    CHECK(wal->InitialHardState() == hs);
    REQUIRE(wal->Close().ok());
  }
  auto wal = OpenOk(fs);
  CHECK(wal->InitialHardState() == hs);
  CHECK(wal->FirstIndex() == LogIndex(1));
  CHECK(wal->LastIndex() == LogIndex(10));
  auto all = ReadAll(*wal);
  REQUIRE(all.size() == 10);
  for (std::uint64_t i = 1; i <= 10; ++i) CHECK(all[i - 1] == MakeEntry(i, i <= 5 ? 1 : 2));
}

TEST_CASE("wal: Entries honours max_bytes but returns at least one entry", "[wal]") {
  SimFileSystem fs;
  auto wal = OpenOk(fs);
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 10, 1, 100)).ok());
  CHECK(wal->Entries(LogIndex(1), LogIndex(11), 0).size() == 1);
  CHECK(wal->Entries(LogIndex(1), LogIndex(11), 250).size() == 2);
  CHECK(wal->Entries(LogIndex(3), LogIndex(11), 300).size() == 3);
  CHECK(wal->Entries(LogIndex(3), LogIndex(5), UINT64_MAX).size() == 2);
  CHECK(wal->TryEntries(LogIndex(0), LogIndex(3), 10).status().Is(StatusCode::kInvalidArgument));
  CHECK(wal->TryEntries(LogIndex(5), LogIndex(12), 10).status().Is(StatusCode::kInvalidArgument));
}

TEST_CASE("wal: an append at or below the last index truncates the conflicting suffix", "[wal]") {
  SimFileSystem fs;
  {
    auto wal = OpenOk(fs);
    REQUIRE(AppendDurably(*wal, MakeEntries(1, 10, 1)).ok());
    REQUIRE(AppendDurably(*wal, MakeEntries(6, 7, 2)).ok());  // Raft §5.3
    CHECK(wal->LastIndex() == LogIndex(7));
    CHECK(wal->TermAt(LogIndex(6)) == std::optional<Term>(Term(2)));
    CHECK(wal->TermAt(LogIndex(5)) == std::optional<Term>(Term(1)));
    REQUIRE(wal->Close().ok());
  }
  auto wal = OpenOk(fs);
  CHECK(wal->LastIndex() == LogIndex(7));
  const auto all = ReadAll(*wal);
  CHECK(all[5] == MakeEntry(6, 2));
  CHECK(all[6] == MakeEntry(7, 2));
}

TEST_CASE("wal: invalid requests are refused without effect", "[wal]") {
  SimFileSystem fs;
  auto wal = OpenOk(fs);
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 3, 1)).ok());
  Callbacks cb;
  CHECK(
      wal->Append(MakeEntries(5, 6, 1), std::nullopt, cb.Make()).Is(StatusCode::kInvalidArgument));
  auto gap = MakeEntries(4, 5, 1);
  gap[1].index = LogIndex(7);
  CHECK(wal->Append(gap, std::nullopt, cb.Make()).Is(StatusCode::kInvalidArgument));
  REQUIRE(SnapshotDurably(*wal, raft::SnapshotMeta{LogIndex(2), Term(1), {}}).ok());
  CHECK(
      wal->Append(MakeEntries(2, 2, 2), std::nullopt, cb.Make()).Is(StatusCode::kInvalidArgument));
  CHECK(wal->SaveSnapshot(raft::SnapshotMeta{LogIndex(1), Term(1), {}}, cb.Make())
            .Is(StatusCode::kInvalidArgument));
  CHECK(cb.Count() == 0);
  CHECK(wal->LastIndex() == LogIndex(3));
}

TEST_CASE("wal: entries larger than entry_bytes_max are refused", "[wal]") {
  SimFileSystem fs;
  Options o = SmallSegments();
  o.entry_bytes_max = 64;
  auto wal = OpenOk(fs, o);
  Callbacks cb;
  CHECK(
      wal->Append({MakeEntry(1, 1, 65)}, std::nullopt, cb.Make()).Is(StatusCode::kInvalidArgument));
  CHECK(AppendDurably(*wal, {MakeEntry(1, 1, 64)}).ok());
}

TEST_CASE("wal: a snapshot matching the log keeps the suffix, a newer one discards the log",
          "[wal]") {
  SimFileSystem fs;
  const raft::SnapshotMeta keep{LogIndex(4), Term(1), {{NodeId(1), NodeId(2)}, {}}};
  const raft::SnapshotMeta past{LogIndex(20), Term(3), {{NodeId(1)}, {NodeId(5)}}};
  {
    auto wal = OpenOk(fs);
    REQUIRE(AppendDurably(*wal, MakeEntries(1, 8, 1)).ok());
    REQUIRE(SnapshotDurably(*wal, keep).ok());
    CHECK(wal->FirstIndex() == LogIndex(5));
    CHECK(wal->LastIndex() == LogIndex(8));
    CHECK(wal->TermAt(LogIndex(4)) == std::optional<Term>(Term(1)));
    CHECK_FALSE(wal->TermAt(LogIndex(3)).has_value());
    REQUIRE(wal->Close().ok());
  }
  {
    auto wal = OpenOk(fs);
    CHECK(wal->LastSnapshot() == keep);
    CHECK(wal->FirstIndex() == LogIndex(5));
    CHECK(ReadAll(*wal).front() == MakeEntry(5, 1));
    REQUIRE(SnapshotDurably(*wal, past).ok());  // Raft §7: the log does not match; drop it
    CHECK(wal->FirstIndex() == LogIndex(21));
    CHECK(wal->LastIndex() == LogIndex(20));
    REQUIRE(AppendDurably(*wal, MakeEntries(21, 22, 3)).ok());
    REQUIRE(wal->Close().ok());
  }
  auto wal = OpenOk(fs);
  CHECK(wal->LastSnapshot() == past);
  CHECK(wal->FirstIndex() == LogIndex(21));
  CHECK(wal->LastIndex() == LogIndex(22));
}

TEST_CASE("wal: an installed snapshot discards the log even where it matches", "[wal]") {
  SimFileSystem fs;
  {
    auto wal = OpenOk(fs);
    REQUIRE(AppendDurably(*wal, MakeEntries(1, 8, 1)).ok());
    Callbacks cb;
    REQUIRE(wal->InstallSnapshot(raft::SnapshotMeta{LogIndex(4), Term(1), {}}, cb.Make()).ok());
    REQUIRE(cb.Wait(1));
    CHECK(wal->FirstIndex() == LogIndex(5));
    CHECK(wal->LastIndex() == LogIndex(4));
    REQUIRE(AppendDurably(*wal, MakeEntries(5, 6, 2)).ok());
  }
  auto wal = OpenOk(fs);
  CHECK(wal->LastSnapshot().index == LogIndex(4));
  CHECK(ReadAll(*wal) == MakeEntries(5, 6, 2));
}

TEST_CASE("wal: segments roll over and compaction deletes whole covered segments", "[wal]") {
  SimFileSystem fs;
  const raft::HardState hs{Term(1), NodeId(1), LogIndex(150)};
  {
    auto wal = OpenOk(fs, SmallSegments(4096));
    for (std::uint64_t i = 1; i <= 200; i += 10) {
      REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 9, 1, 100)).ok());
    }
    REQUIRE(AppendDurably(*wal, {}, hs).ok());
    CHECK(wal->stats().rollovers >= 4);
    const std::size_t before = SegmentCount(fs);
    REQUIRE(before >= 5);
    REQUIRE(SnapshotDurably(*wal, raft::SnapshotMeta{LogIndex(150), Term(1), {}}).ok());
    REQUIRE(testing::Barrier(*wal).ok());  // compaction runs after the snapshot's callback
    CHECK(wal->stats().segments_removed > 0);
    CHECK(SegmentCount(fs) == before - wal->stats().segments_removed);
    CHECK(wal->FirstIndex() == LogIndex(151));
    REQUIRE(wal->Close().ok());
  }
  auto wal = OpenOk(fs, SmallSegments(4096));
  CHECK(wal->InitialHardState() == hs);
  CHECK(wal->LastSnapshot().index == LogIndex(150));
  CHECK(wal->FirstIndex() == LogIndex(151));
  CHECK(wal->LastIndex() == LogIndex(200));
  const auto all = ReadAll(*wal);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == MakeEntry(151 + i, 1, 100));
}

TEST_CASE("wal: evicted entries are read back from disk and verified", "[wal]") {
  SimFileSystem fs;
  Options o = SmallSegments(64 * 1024);
  o.cache_bytes_max = 1000;
  auto wal = OpenOk(fs, o);
  for (std::uint64_t i = 1; i <= 100; i += 5) {
    REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 4, 1, 200)).ok());
  }
  const auto all = ReadAll(*wal);
  REQUIRE(all.size() == 100);
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == MakeEntry(i + 1, 1, 200));
  CHECK(wal->stats().disk_reads >= 90);
}

TEST_CASE("wal: a corrupt evicted entry is a Corruption from TryEntries", "[wal]") {
  SimFileSystem fs;
  Options o = SmallSegments(64 * 1024);
  o.cache_bytes_max = 0;
  auto wal = OpenOk(fs, o);
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 3, 1, 50)).ok());
  // Damage the bytes of entry 2 on disk (after it was written and evicted).
  const std::string path = std::string(kDir) + "/0000000000000001.wal";
  const std::string image = *fs.Contents(path);
  const std::string needle = MakeEntry(2, 1, 50).data.substr(0, 16);
  const auto at = image.find(needle);
  REQUIRE(at != std::string::npos);
  fs.CorruptDurable(path, at, "XXXX");
  auto r = wal->TryEntries(LogIndex(1), LogIndex(4), UINT64_MAX);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().Is(StatusCode::kCorruption));
  CHECK_THAT(r.status().message(), Catch::Contains("0000000000000001.wal"));
}

TEST_CASE("wal: group commit turns concurrent appends into few frames", "[wal]") {
  SimFileSystem fs;
  auto faults = std::make_shared<FaultInjector>();
  fs.SetFaultHook(faults);
  auto wal = OpenOk(fs, SmallSegments(1 << 20));
  // Hold the first frame's fdatasync so that everything else queues behind it.
  faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(wal->Append({MakeEntry(1, 1)}, std::nullopt, cb.Make()).ok());
  REQUIRE(faults->AwaitBlocked(1, testing::kWaitTimeout));
  std::mutex index_mu;  // Raft indexes are assigned in order, as the driver would
  std::uint64_t next = 2;
  std::atomic<int> refused{0};  // Catch2 assertions are not thread-safe: count, check after
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 25; ++k) {
        std::lock_guard lock(index_mu);
        if (!wal->Append({MakeEntry(next, 1)}, std::nullopt, cb.Make()).ok()) ++refused;
        ++next;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(refused == 0);
  CHECK(cb.Count() == 0);                    // nothing is acknowledged before its fdatasync
  CHECK(wal->LastIndex() == LogIndex(201));  // but readers see everything at once
  faults->Release(FsOp::kSync);
  REQUIRE(cb.Wait(201));
  for (const Status& s : cb.Statuses()) CHECK(s.ok());
  CHECK(wal->stats().frames == 2);  // the stalled one, and one for the 200 queued behind it
  CHECK(wal->stats().max_frame_requests == 200);
}

TEST_CASE("wal: callbacks run in submission order", "[wal]") {
  SimFileSystem fs;
  auto wal = OpenOk(fs);
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> failed{0};
  for (int i = 0; i < 50; ++i) {
    auto cb = [&, i](const Status& s) {
      if (!s.ok()) ++failed;
      std::lock_guard lock(mu);
      order.push_back(i);
    };
    if (i % 3 == 0) {
      wal->Sync(cb);
    } else {
      REQUIRE(wal->Append({MakeEntry(wal->LastIndex().value() + 1, 1)}, std::nullopt, cb).ok());
    }
  }
  Callbacks last;
  wal->Sync(last.Make());
  REQUIRE(last.Wait(1));
  CHECK(failed == 0);
  std::lock_guard lock(mu);
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[i] == i);
}

TEST_CASE("wal: a second process cannot open the same directory", "[wal]") {
  SimFileSystem fs;
  auto wal = OpenOk(fs);
  auto second = Wal::Open(fs, kDir, SmallSegments());
  CHECK(second.status().Is(StatusCode::kUnavailable));
}

TEST_CASE("wal: fallocate preallocation works too", "[wal]") {
  SimFileSystem fs;
  Options o = SmallSegments(8192);
  o.prealloc_mode = PreallocMode::kFallocate;
  {
    auto wal = OpenOk(fs, o);
    for (std::uint64_t i = 1; i <= 100; i += 10) {
      REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 9, 1, 100)).ok());
    }
    CHECK(wal->stats().rollovers > 0);
  }
  auto wal = OpenOk(fs, o);
  CHECK(wal->LastIndex() == LogIndex(100));
}

}  // namespace
}  // namespace epoch::wal
