// The WAL under every storage fault of the brief, on the simulated file system: lost unsynced
// data, a torn last write at every byte, EIO on write and on fdatasync (fail-stop), a stalled
// fdatasync, crashes during rollover and preallocation, corruption before the tail, a truncated
// conflicting suffix across a crash, and compaction across a crash.
#include <catch2/catch.hpp>
#include <cstring>

#include "epoch/wal/fault_injector.h"
#include "epoch/wal/format.h"
#include "epoch/wal/sim_file_system.h"
#include "epoch/wal/wal.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using testing::AppendDurably;
using testing::Callbacks;
using testing::kWaitTimeout;
using testing::MakeEntries;
using testing::MakeEntry;
using testing::ReadAll;
using testing::SnapshotDurably;

constexpr const char* kDir = "/data/wal";

// A WAL on `fs` with 2 KiB segments (a rollover every few frames) and no log output.
std::unique_ptr<Wal> OpenSmallSegments(SimFileSystem& fs) {
  Options options;
  options.segment_bytes = 2048;
  options.log = [](LogLevel, std::string_view) {};
  auto opened = Wal::Open(fs, kDir, options);
  INFO(opened.status().ToString());
  REQUIRE(opened.ok());
  return std::move(opened).value();
}

std::string SegPath(std::uint64_t seq) {
  return std::string(kDir) + "/" + format::SegmentFileName(seq);
}

struct Env {
  SimFileSystem fs;
  std::shared_ptr<FaultInjector> faults = std::make_shared<FaultInjector>();
  std::vector<std::string> warnings;
  Env() { fs.SetFaultHook(faults); }

  Options Opts(std::uint64_t segment_bytes = 4096) {
    Options o;
    o.segment_bytes = segment_bytes;
    o.log = [this](LogLevel, std::string_view m) { warnings.emplace_back(m); };
    return o;
  }
  std::unique_ptr<Wal> Open(std::uint64_t segment_bytes = 4096) {
    auto wal = Wal::Open(fs, kDir, Opts(segment_bytes));
    INFO(wal.status().ToString());
    REQUIRE(wal.ok());
    return std::move(wal).value();
  }
  // Crash "the process": the WAL object dies with the file system's volatile state.
  void CrashAndDiscard(std::unique_ptr<Wal>& wal,
                       const std::map<std::string, FileCrashPlan>& plans = {}) {
    fs.Crash(plans);
    faults->Clear();  // let stalled threads run into the crashed (down) file system
    wal.reset();
    fs.Restart();
  }
};

TEST_CASE("fault: a crash loses unsynced requests and keeps acknowledged ones", "[wal][fault]") {
  Env env;
  auto wal = env.Open();
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 5, 1)).ok());
  env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(
      wal->Append(MakeEntries(6, 9, 1), raft::HardState{Term(1), NodeId(1), LogIndex(9)}, cb.Make())
          .ok());
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  env.CrashAndDiscard(wal);
  REQUIRE(cb.Wait(1));
  CHECK_FALSE(cb.Statuses()[0].ok());  // never acknowledged as durable

  wal = env.Open();
  CHECK(wal->LastIndex() == LogIndex(5));
  CHECK(wal->InitialHardState().IsEmpty());
  CHECK(ReadAll(*wal) == MakeEntries(1, 5, 1));
}

// One scenario for the torn-write sweep: 5 acknowledged entries, then a frame of 3 entries and a
// hard state whose fdatasync never completes; the crash keeps `keep` bytes of that write.
void TornWriteScenario(std::size_t keep, TearFill fill, std::size_t* frame_bytes) {
  Env env;
  auto wal = env.Open(64 * 1024);
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 5, 1, 40)).ok());
  env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(wal->Append(MakeEntries(6, 8, 2, 40), raft::HardState{Term(2), NodeId(2), LogIndex(5)},
                      cb.Make())
              .ok());
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  REQUIRE(env.fs.UnsyncedOps(SegPath(1)) == 1);
  const auto write = env.fs.UnsyncedWrite(SegPath(1), 0);
  REQUIRE(write.has_value());
  *frame_bytes = write->bytes.size();
  // The frame is complete once its header and payload landed; the zero padding after them
  // (to an 8-byte boundary) is not data.
  std::uint32_t payload_len = 0;
  std::memcpy(&payload_len, write->bytes.data() + 4, 4);
  const std::size_t data_bytes = format::kFrameHeaderBytes + payload_len;
  env.CrashAndDiscard(wal, {{SegPath(1), FileCrashPlan{0, keep, fill}}});
  // Complete iff every checksummed byte is on disk (a torn write whose missing bytes happened to
  // be zeros already is complete).
  const std::string image = *env.fs.DurableContents(SegPath(1));
  const bool complete = image.compare(write->offset, data_bytes, write->bytes, 0, data_bytes) == 0;
  wal = env.Open(64 * 1024);
  INFO("keep " << keep << " of " << *frame_bytes << " fill " << static_cast<int>(fill));
  if (complete) {
    CHECK(wal->LastIndex() == LogIndex(8));
    CHECK(wal->InitialHardState().term == Term(2));
  } else {
    // The torn frame is dropped as a whole, nothing before it is touched.
    CHECK(wal->LastIndex() == LogIndex(5));
    CHECK(wal->InitialHardState().IsEmpty());
    const bool wrote_something = keep > 0 || fill == TearFill::kGarbage;
    if (wrote_something) CHECK(wal->recovery().torn_bytes_dropped > 0);
  }

  CHECK(ReadAll(*wal).front() == MakeEntry(1, 1, 40));
  // The zeroed tail takes new frames, and nothing stale comes back on the next open.
  REQUIRE(AppendDurably(*wal, MakeEntries(wal->LastIndex().value() + 1, 12, 3, 10)).ok());
  REQUIRE(wal->Close().ok());
  wal = env.Open(64 * 1024);
  CHECK(wal->LastIndex() == LogIndex(12));
  CHECK(wal->TermAt(LogIndex(12)) == std::optional<Term>(Term(3)));
  CHECK(wal->recovery().torn_bytes_dropped == 0);
}

TEST_CASE("fault: a torn last write is truncated at every byte, with zeros or garbage",
          "[wal][fault]") {
  std::size_t frame_bytes = 0;
  TornWriteScenario(0, TearFill::kOld, &frame_bytes);
  REQUIRE(frame_bytes > 100);
  for (std::size_t keep = 0; keep <= frame_bytes; ++keep) {
    TornWriteScenario(keep, TearFill::kOld, &frame_bytes);
    if (keep < frame_bytes) TornWriteScenario(keep, TearFill::kGarbage, &frame_bytes);
  }
}

TEST_CASE("fault: EIO on write is fail-stop for pending and later requests", "[wal][fault]") {
  Env env;
  auto wal = env.Open();
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 3, 1)).ok());
  env.faults->FailNext(FsOp::kWrite, Status::IOError("write: EIO"), 1, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(wal->Append(MakeEntries(4, 5, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(cb.Wait(1));
  CHECK(cb.Statuses()[0].Is(StatusCode::kIOError));
  CHECK(wal->Health().Is(StatusCode::kIOError));
  // The injected fault was one-shot, yet everything after it fails too: fail-stop.
  REQUIRE(wal->Append(MakeEntries(6, 6, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(wal->SaveHardState(raft::HardState{Term(2), NodeId(1), LogIndex(0)}, cb.Make()).ok());
  wal->Sync(cb.Make());
  REQUIRE(cb.Wait(4));
  for (const Status& s : cb.Statuses()) CHECK(s.Is(StatusCode::kIOError));
  CHECK(wal->Close().Is(StatusCode::kIOError));
}

TEST_CASE("fault: EIO on fdatasync is fail-stop and never retried", "[wal][fault]") {
  Env env;
  auto wal = env.Open();
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 3, 1)).ok());
  // Several requests wait behind a stalled fdatasync, which then fails.
  env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(wal->Append(MakeEntries(4, 4, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  REQUIRE(wal->Append(MakeEntries(5, 5, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(wal->Append(MakeEntries(6, 6, 1), std::nullopt, cb.Make()).ok());
  const std::uint64_t syncs_before = env.faults->Count(FsOp::kSync);
  env.faults->FailNext(FsOp::kSync, Status::IOError("fdatasync: EIO"), 1, PathEndsWith(".wal"));
  env.faults->Release(FsOp::kSync);
  REQUIRE(cb.Wait(3));
  for (const Status& s : cb.Statuses()) CHECK(s.Is(StatusCode::kIOError));
  // Later requests fail without another fdatasync being attempted.
  REQUIRE(wal->Append(MakeEntries(7, 7, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(cb.Wait(4));
  CHECK(cb.Statuses()[3].Is(StatusCode::kIOError));
  CHECK(env.faults->Count(FsOp::kSync) <= syncs_before + 1);  // + the preallocator's, at most
  CHECK_THAT(wal->Health().message(), Catch::Contains("fail-stop"));
  bool logged_error = false;
  for (const auto& w : env.warnings) logged_error |= w.find("fail-stop") != std::string::npos;
  CHECK(logged_error);
}

TEST_CASE("fault: a stalled fdatasync holds callbacks but not the Raft driver", "[wal][fault]") {
  Env env;
  auto wal = env.Open();
  env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  Callbacks cb;
  REQUIRE(wal->Append(MakeEntries(1, 2, 1), std::nullopt, cb.Make()).ok());
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  // The driver keeps going: more appends are accepted and every read answers at once.
  for (std::uint64_t i = 3; i <= 20; ++i) {
    REQUIRE(wal->Append({MakeEntry(i, 1)}, std::nullopt, cb.Make()).ok());
  }
  CHECK(wal->LastIndex() == LogIndex(20));
  CHECK(wal->TermAt(LogIndex(20)) == std::optional<Term>(Term(1)));
  CHECK(ReadAll(*wal).size() == 20);
  CHECK(cb.Count() == 0);
  CHECK(wal->stats().pending_bytes > 0);
  env.faults->Release(FsOp::kSync);
  REQUIRE(cb.Wait(19));
  for (const Status& s : cb.Statuses()) CHECK(s.ok());
  CHECK(wal->Health().ok());
}

// Appends three 100-byte entries at a time and waits for each to be durable, until one of them
// blocks on a stalled operation. Returns the last acknowledged index; `next` is the next index.
// `cb` must outlive the WAL (the blocked request's callback runs when the WAL is torn down).
std::uint64_t AppendUntilBlocked(Env& env, Wal& wal, std::uint64_t& next, Term term,
                                 Callbacks& cb) {
  std::uint64_t acked = next - 1;
  for (std::size_t n = cb.Count() + 1; n <= 1000; ++n) {
    REQUIRE(
        wal.Append(MakeEntries(next, next + 2, term.value(), 100), std::nullopt, cb.Make()).ok());
    next += 3;
    for (;;) {
      if (cb.Wait(n, std::chrono::milliseconds(5))) break;
      if (env.faults->Blocked() > 0) return acked;
    }
    acked = next - 1;
  }
  FAIL("no append ever blocked");
  return acked;
}

TEST_CASE("fault: a crash during rollover loses only the unacknowledged frame", "[wal][fault]") {
  for (FsOp stalled : {FsOp::kRename, FsOp::kSyncDir}) {
    INFO("stalled " << FsOpName(stalled));
    Env env;
    Callbacks cb;
    auto wal = env.Open(2048);
    // Without snapshots (no compaction) only a rollover renames or syncs the directory once the
    // WAL is open.
    env.faults->Stall(stalled);
    std::uint64_t next = 1;
    const std::uint64_t acked = AppendUntilBlocked(env, *wal, next, Term(1), cb);
    REQUIRE(acked > 0);
    env.CrashAndDiscard(wal);
    wal = env.Open(2048);
    // The rollover's frame was never written (it waits for the durable name), so exactly the
    // acknowledged entries are there.
    CHECK(wal->LastIndex() == LogIndex(acked));
    const auto all = ReadAll(*wal);
    for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i] == MakeEntry(i + 1, 1, 100));
    // And the WAL keeps working across segment boundaries.
    REQUIRE(AppendDurably(*wal, MakeEntries(acked + 1, acked + 30, 2, 100)).ok());
    REQUIRE(wal->Close().ok());
    wal = env.Open(2048);
    CHECK(wal->LastIndex() == LogIndex(acked + 30));
    CHECK(wal->TermAt(wal->LastIndex()) == std::optional<Term>(Term(2)));
  }
}

TEST_CASE("fault: a crash during preallocation leaves a clean WAL", "[wal][fault]") {
  Env env;
  env.Open(4096).reset();  // segment 1 exists; its successor is made in the background
  env.faults->Stall(FsOp::kSync, PathEndsWith(".prealloc"));
  auto wal = env.Open(4096);
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));  // the next segment is half-made
  REQUIRE(AppendDurably(*wal, MakeEntries(1, 5, 1)).ok());
  env.CrashAndDiscard(wal);
  wal = env.Open(4096);
  CHECK(wal->LastIndex() == LogIndex(5));
  auto names = env.fs.ListDir(kDir);
  REQUIRE(names.ok());
  // A fresh .prealloc may exist (the new preallocator), but it is never part of the log.
  for (const auto& n : *names)
    CHECK((n == "LOCK" || n.ends_with(".wal") || n.ends_with(".prealloc")));
}

TEST_CASE("fault: a crash after rollover but before the new segment's first frame is durable",
          "[wal][fault]") {
  Env env;
  auto wal = env.Open(2048);
  std::uint64_t next = 1;
  std::uint64_t acked = 0;
  Callbacks cb;
  // Each frame's fdatasync is held until we see whether it is the first one of a new segment.
  for (int n = 1; n <= 1000; ++n) {
    env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
    const std::uint64_t rollovers = wal->stats().rollovers;
    REQUIRE(wal->Append(MakeEntries(next, next + 2, 1, 100), std::nullopt, cb.Make()).ok());
    next += 3;
    REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
    if (wal->stats().rollovers > rollovers) break;
    env.faults->Release(FsOp::kSync);
    REQUIRE(cb.Wait(n));
    acked = next - 1;
  }
  REQUIRE(wal->stats().rollovers > 0);
  env.CrashAndDiscard(wal);
  wal = env.Open(2048);
  CHECK(wal->LastIndex() == LogIndex(acked));
  REQUIRE(AppendDurably(*wal, MakeEntries(acked + 1, acked + 3, 2, 100)).ok());
  REQUIRE(wal->Close().ok());
  wal = env.Open(2048);  // the empty segment got its checkpoint with the first new frame
  CHECK(wal->LastIndex() == LogIndex(acked + 3));
}

TEST_CASE("fault: corruption before the tail refuses to open, naming file and offset",
          "[wal][fault]") {
  Env env;
  {
    auto wal = env.Open(64 * 1024);
    for (std::uint64_t i = 1; i <= 30; i += 3) {
      REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 2, 1, 50)).ok());
    }
  }
  const std::string image = *env.fs.DurableContents(SegPath(1));
  const std::size_t at = image.find(MakeEntry(4, 1, 50).data.substr(0, 16));
  REQUIRE(at != std::string::npos);
  env.fs.CorruptDurable(SegPath(1), at + 3, std::string(1, static_cast<char>(image[at + 3] ^ 4)));
  auto wal = Wal::Open(env.fs, kDir, env.Opts(64 * 1024));
  REQUIRE_FALSE(wal.ok());
  CHECK(wal.status().Is(StatusCode::kCorruption));
  CHECK_THAT(wal.status().message(), Catch::Contains("0000000000000001.wal"));
  CHECK_THAT(wal.status().message(), Catch::Contains("at offset"));
  CHECK_THAT(wal.status().message(), Catch::Contains("valid frame follows"));
}

TEST_CASE("fault: damage at the end of a sealed segment is refused unless provably harmless",
          "[wal][fault]") {
  Env env;
  std::uint64_t seg1_end = 0;
  {
    auto wal = env.Open(2048);
    for (std::uint64_t i = 1; wal->stats().rollovers < 2; i += 3) {
      REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 2, 1, 100)).ok());
    }
  }
  const std::string seg1 = *env.fs.DurableContents(SegPath(1));
  seg1_end = seg1.find_last_not_of('\0') + 1;
  SECTION("garbage in the unused, zeroed space is tolerated (the next checkpoint proves it)") {
    env.fs.CorruptDurable(SegPath(1), format::Align8(seg1_end) + 64, "garbage!");
    auto wal = Wal::Open(env.fs, kDir, env.Opts(2048));
    REQUIRE(wal.ok());
    CHECK_FALSE((*wal)->recovery().warnings.empty());
  }
  SECTION("a damaged last frame of a sealed segment is refused") {
    env.fs.CorruptDurable(SegPath(1), seg1_end - 5,
                          std::string(1, static_cast<char>(seg1[seg1_end - 5] ^ 0x10)));
    auto wal = Wal::Open(env.fs, kDir, env.Opts(2048));
    REQUIRE_FALSE(wal.ok());
    CHECK(wal.status().Is(StatusCode::kCorruption));
    CHECK_THAT(wal.status().message(), Catch::Contains("0000000000000001.wal"));
  }
  SECTION("a bad segment header is refused") {
    env.fs.CorruptDurable(SegPath(2), 3, "X");
    auto wal = Wal::Open(env.fs, kDir, env.Opts(2048));
    REQUIRE_FALSE(wal.ok());
    CHECK_THAT(wal.status().message(), Catch::Contains("0000000000000002.wal"));
  }
  SECTION("a missing segment is refused") {
    REQUIRE(env.fs.Remove(SegPath(2)).ok());
    auto wal = Wal::Open(env.fs, kDir, env.Opts(2048));
    REQUIRE_FALSE(wal.ok());
    CHECK_THAT(wal.status().message(), Catch::Contains("missing"));
  }
}

TEST_CASE("fault: a truncated conflicting suffix survives a crash, atomically", "[wal][fault]") {
  for (bool lands : {false, true}) {
    Env env;
    auto wal = env.Open(64 * 1024);
    REQUIRE(AppendDurably(*wal, MakeEntries(1, 10, 1)).ok());
    env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
    Callbacks cb;
    REQUIRE(wal->Append(MakeEntries(6, 8, 2), std::nullopt, cb.Make()).ok());
    REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
    env.CrashAndDiscard(wal, {{SegPath(1), FileCrashPlan{lands ? 1u : 0u, std::nullopt}}});
    wal = env.Open(64 * 1024);
    INFO("frame lands: " << lands);
    if (lands) {
      CHECK(wal->LastIndex() == LogIndex(8));
      CHECK(ReadAll(*wal).back() == MakeEntry(8, 2));
      CHECK(wal->TermAt(LogIndex(5)) == std::optional<Term>(Term(1)));
    } else {
      CHECK(wal->LastIndex() == LogIndex(10));
      CHECK(ReadAll(*wal).back() == MakeEntry(10, 1));
    }
  }
}

TEST_CASE("fault: a crash in the middle of compaction leaves a consistent log", "[wal][fault]") {
  Env env;
  auto wal = env.Open(2048);
  for (std::uint64_t i = 1; i <= 120; i += 3) {
    REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 2, 1, 100)).ok());
  }
  REQUIRE(wal->stats().rollovers >= 4);
  // The second deletion blocks; the first happened but was never made durable by a dir sync.
  env.faults->Stall(FsOp::kRemove, PathEndsWith("0000000000000002.wal"));
  Callbacks cb;
  REQUIRE(wal->SaveSnapshot(raft::SnapshotMeta{LogIndex(100), Term(1), {}}, cb.Make()).ok());
  REQUIRE(cb.Wait(1));
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  env.CrashAndDiscard(wal);
  wal = env.Open(2048);
  CHECK(wal->LastSnapshot().index == LogIndex(100));
  CHECK(wal->FirstIndex() == LogIndex(101));
  CHECK(wal->LastIndex() == LogIndex(120));
  CHECK(ReadAll(*wal).front() == MakeEntry(101, 1, 100));
}

// One failed sync stops the WAL for good: the failed request, every pending and every later one
// get the error (fsyncgate: SimFileSystem, like Linux, drops the dirty pages of a failed
// fdatasync, so a retry would report success without the data). A power loss afterwards keeps
// every acknowledged entry. For each sync the WAL makes: a frame's fdatasync, the next segment's
// preallocation fdatasync, and the directory fsync of a rollover.
TEST_CASE("fault: after one failed sync nothing succeeds, and power loss keeps the acknowledged",
          "[wal][fault]") {
  struct Site {
    const char* name;
    FsOp op;
    const char* suffix;
  };
  for (const Site& site : {Site{"frame fdatasync", FsOp::kSync, ".wal"},
                           Site{"preallocation fdatasync", FsOp::kSync, ".prealloc"},
                           Site{"directory fsync at rollover", FsOp::kSyncDir, ""}}) {
    for (std::uint64_t seed = 1; seed <= 8; ++seed) {
      INFO(site.name << ", seed " << seed);
      SimFileSystem fs(seed);
      auto faults = std::make_shared<FaultInjector>();
      fs.SetFaultHook(faults);
      std::unique_ptr<Wal> wal = OpenSmallSegments(fs);
      std::uint64_t next = 1;
      for (int i = 0; i < 3; ++i, next += 3) {
        REQUIRE(AppendDurably(*wal, MakeEntries(next, next + 2, 1, 100)).ok());
      }
      faults->FailNext(site.op, Status::IOError("EIO"), 1,
                       *site.suffix != '\0' ? PathEndsWith(site.suffix) : PathMatch{});
      Callbacks cb;
      // One request per frame, so that rollovers (and preallocations) follow one another.
      for (std::size_t i = 0; i < 40; ++i, next += 3) {
        REQUIRE(wal->Append(MakeEntries(next, next + 2, 1, 100), std::nullopt, cb.Make()).ok());
        REQUIRE(cb.Wait(i + 1));
      }
      // Acknowledged: a prefix; from the first failure on, every request failed.
      const std::vector<Status> statuses = cb.Statuses();
      std::size_t acked = 0;
      while (acked < statuses.size() && statuses[acked].ok()) ++acked;
      REQUIRE(acked < statuses.size());  // the fault was hit
      for (std::size_t i = acked; i < statuses.size(); ++i)
        CHECK(statuses[i].Is(StatusCode::kIOError));
      // Nothing later succeeds, whatever the request.
      Callbacks later;
      REQUIRE(wal->Append(MakeEntries(next, next, 1, 100), std::nullopt, later.Make()).ok());
      REQUIRE(
          wal->SaveHardState(raft::HardState{Term(2), NodeId(1), LogIndex(1)}, later.Make()).ok());
      wal->Sync(later.Make());
      REQUIRE(wal->SaveSnapshot(raft::SnapshotMeta{LogIndex(3), Term(1), {}}, later.Make()).ok());
      REQUIRE(later.Wait(4));
      for (const Status& s : later.Statuses()) CHECK(s.Is(StatusCode::kIOError));
      CHECK(wal->Health().Is(StatusCode::kIOError));
      CHECK(wal->Close().Is(StatusCode::kIOError));

      (void)fs.CrashRandom(seed);
      wal.reset();
      fs.Restart();
      wal = OpenSmallSegments(fs);
      // Every acknowledged entry, intact and in order; beyond them only whole unacknowledged
      // frames of what was written (three entries per request).
      const std::uint64_t acked_last = 9 + 3 * acked;
      CHECK(wal->LastIndex() >= LogIndex(acked_last));
      CHECK(wal->LastIndex().value() % 3 == 0);
      CHECK(ReadAll(*wal) == MakeEntries(1, wal->LastIndex().value(), 1, 100));
      CHECK(wal->InitialHardState().IsEmpty());
    }
  }
}

// Regression (power-loss seed 3 of wal_power_loss_test.cc): compaction deleted segments 1, 2, 3
// without syncing the directory in between; unsynced directory operations need not reach the
// disk in order, and with the deletion of 3 kept and that of 2 lost, recovery found a gap and
// refused to open.
TEST_CASE("fault: compaction's deletions survive power loss in any order the disk allows",
          "[wal][fault]") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    SimFileSystem fs(0, CrashModel{4096, 512, DirOpOrder::kAnySubset});
    std::unique_ptr<Wal> wal = OpenSmallSegments(fs);
    for (std::uint64_t i = 1; i <= 120; i += 3) {
      REQUIRE(AppendDurably(*wal, MakeEntries(i, i + 2, 1, 100)).ok());
    }
    REQUIRE(SnapshotDurably(*wal, raft::SnapshotMeta{LogIndex(100), Term(1), {}}).ok());
    REQUIRE(testing::Barrier(*wal).ok());  // compaction done
    REQUIRE(wal->stats().segments_removed >= 3);
    (void)fs.CrashRandom(seed);
    wal.reset();
    fs.Restart();
    wal = OpenSmallSegments(fs);
    CHECK(wal->LastSnapshot().index == LogIndex(100));
    CHECK(wal->LastIndex() == LogIndex(120));
  }
}

}  // namespace
}  // namespace epoch::wal
