// SimFileSystem's crash model and the FaultInjector: the tools the WAL tests rely on must
// themselves behave as documented.
#include "epoch/wal/sim_file_system.h"

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "epoch/wal/fault_injector.h"

namespace epoch::wal {
namespace {

std::unique_ptr<File> Create(SimFileSystem& fs, const std::string& path) {
  auto f = fs.Open(path, OpenMode::kCreateExclusive);
  REQUIRE(f.ok());
  return std::move(f).value();
}

TEST_CASE("sim fs: a crash keeps synced data and drops unsynced data", "[wal][simfs]") {
  SimFileSystem fs;
  REQUIRE(fs.CreateDir("/d").ok());
  auto f = Create(fs, "/d/a");
  REQUIRE(f->Write(0, "durable").ok());
  REQUIRE(f->Sync().ok());
  REQUIRE(fs.SyncDir("/d").ok());
  REQUIRE(f->Write(7, "-lost").ok());
  CHECK(fs.Contents("/d/a") == std::optional<std::string>("durable-lost"));
  fs.Crash();
  CHECK(fs.Contents("/d/a") == std::optional<std::string>("durable"));
  // Down until restarted, and the old handle belongs to the dead process for good.
  CHECK(fs.Open("/d/a", OpenMode::kRead).status().Is(StatusCode::kIOError));
  CHECK(f->Write(0, "x").Is(StatusCode::kIOError));
  fs.Restart();
  CHECK(f->Write(0, "x").Is(StatusCode::kIOError));
  CHECK(fs.Open("/d/a", OpenMode::kRead).ok());
}

TEST_CASE("sim fs: names need a directory sync", "[wal][simfs]") {
  SimFileSystem fs;
  REQUIRE(fs.CreateDir("/d").ok());
  auto f = Create(fs, "/d/new");
  REQUIRE(f->Write(0, "data").ok());
  REQUIRE(f->Sync().ok());
  fs.Crash();
  fs.Restart();
  CHECK_FALSE(fs.Exists("/d/new"));  // file synced, name not

  auto g = Create(fs, "/d/tmp");
  REQUIRE(g->Sync().ok());
  REQUIRE(fs.SyncDir("/d").ok());
  REQUIRE(fs.Rename("/d/tmp", "/d/final").ok());
  fs.Crash();
  fs.Restart();
  CHECK(fs.Exists("/d/tmp"));
  CHECK_FALSE(fs.Exists("/d/final"));

  REQUIRE(fs.Rename("/d/tmp", "/d/final").ok());
  REQUIRE(fs.SyncDir("/d").ok());
  REQUIRE(fs.Remove("/d/final").ok());
  fs.Crash();
  fs.Restart();
  CHECK(fs.Exists("/d/final"));  // the remove was not durable
}

TEST_CASE("sim fs: a crash plan tears the last write at the chosen byte", "[wal][simfs]") {
  SimFileSystem fs;
  REQUIRE(fs.CreateDir("/d").ok());
  auto f = Create(fs, "/d/a");
  REQUIRE(f->Write(0, std::string(1024, '\0')).ok());
  REQUIRE(f->Sync().ok());
  REQUIRE(fs.SyncDir("/d").ok());
  REQUIRE(f->Write(100, "0123456789").ok());
  REQUIRE(f->Write(200, "abcdefghij").ok());
  REQUIRE(fs.UnsyncedOps("/d/a") == 2);
  fs.Crash({{"/d/a", FileCrashPlan{1, 4, TearFill::kOld}}});
  fs.Restart();
  const std::string c = *fs.Contents("/d/a");
  CHECK(c.substr(100, 10) == "0123456789");
  CHECK(c.substr(200, 10) == std::string("abcd") + std::string(6, '\0'));

  auto g = fs.Open("/d/a", OpenMode::kReadWrite);
  REQUIRE(g.ok());
  REQUIRE((*g)->Write(300, std::string(100, 'x')).ok());
  fs.Crash({{"/d/a", FileCrashPlan{0, 10, TearFill::kGarbage}}});
  fs.Restart();
  const std::string d = *fs.Contents("/d/a");
  CHECK(d.substr(300, 10) == std::string(10, 'x'));
  // The rest of the write's sector is garbage (deterministic seed 0: not all zero, not all x).
  const std::string tail = d.substr(310, 90);
  CHECK(tail != std::string(90, 'x'));
  CHECK(tail != std::string(90, '\0'));
}

// Eight pages of 'o' made durable, then eight unsynced one-page writes ('a' + i into page i).
std::unique_ptr<File> EightDirtyPages(SimFileSystem& fs) {
  REQUIRE(fs.CreateDir("/d").ok());
  auto f = Create(fs, "/d/a");
  REQUIRE(f->Write(0, std::string(8 * 4096, 'o')).ok());
  REQUIRE(f->Sync().ok());
  REQUIRE(fs.SyncDir("/d").ok());
  for (int i = 0; i < 8; ++i) {
    REQUIRE(f->Write(i * 4096, std::string(4096, static_cast<char>('a' + i))).ok());
  }
  return f;
}

TEST_CASE("sim fs: power loss keeps any subset of the dirty pages, torn only where written",
          "[wal][simfs]") {
  bool later_without_earlier = false;
  bool torn = false;
  bool garbage = false;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    SimFileSystem fs;
    auto f = EightDirtyPages(fs);
    (void)fs.CrashRandom(seed);
    fs.Restart();
    const std::string c = *fs.Contents("/d/a");
    INFO("seed " << seed);
    REQUIRE(c.size() == 8 * 4096);  // the size was durable
    std::vector<bool> landed(8);
    for (int i = 0; i < 8; ++i) {
      const std::string_view page = std::string_view(c).substr(i * 4096, 4096);
      const char mine = static_cast<char>('a' + i);
      landed[i] = page == std::string(4096, mine);
      if (landed[i] || page == std::string(4096, 'o')) continue;
      // Torn: whole sectors of old or new, except one cut at a byte whose rest is old or garbage.
      torn = true;
      int cut_sectors = 0;
      for (int sc = 0; sc < 8; ++sc) {
        const std::string_view sector = page.substr(sc * 512, 512);
        if (sector == std::string(512, mine) || sector == std::string(512, 'o')) continue;
        ++cut_sectors;
        const std::size_t keep = sector.find_first_not_of(mine);
        const std::string_view rest = sector.substr(keep);
        if (rest != std::string(rest.size(), 'o')) garbage = true;
      }
      CHECK(cut_sectors <= 1);
    }
    for (int i = 0; i < 8; ++i) {
      for (int j = i + 1; j < 8; ++j) later_without_earlier |= landed[j] && !landed[i];
    }
    // The same seed and the same unsynced state give the same image.
    SimFileSystem again;
    auto g = EightDirtyPages(again);
    (void)again.CrashRandom(seed);
    again.Restart();
    CHECK(again.Contents("/d/a") == std::optional<std::string>(c));
  }
  CHECK(later_without_earlier);
  CHECK(torn);
  CHECK(garbage);
}

TEST_CASE("sim fs: bytes a write did not touch survive a torn page (powersafe overwrite)",
          "[wal][simfs]") {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    SimFileSystem fs;
    REQUIRE(fs.CreateDir("/d").ok());
    auto f = Create(fs, "/d/a");
    REQUIRE(f->Write(0, std::string(300, 'd')).ok());  // durable, shares a sector with the next
    REQUIRE(f->Sync().ok());
    REQUIRE(fs.SyncDir("/d").ok());
    REQUIRE(f->Write(300, std::string(5000, 'n')).ok());
    (void)fs.CrashRandom(seed);
    fs.Restart();
    const std::string c = *fs.Contents("/d/a");
    INFO("seed " << seed);
    CHECK(c.substr(0, 300) == std::string(300, 'd'));
  }
}

TEST_CASE("sim fs: a failed fdatasync drops the dirty pages, and a retry does not save them",
          "[wal][simfs]") {
  int lost_despite_retry = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SimFileSystem fs(seed);
    auto faults = std::make_shared<FaultInjector>();
    fs.SetFaultHook(faults);
    auto f = EightDirtyPages(fs);
    faults->FailNext(FsOp::kSync, Status::IOError("fdatasync: EIO"));
    CHECK(f->Sync().Is(StatusCode::kIOError));
    CHECK(f->Sync().ok());  // as Linux: the error was reported once
    // Pages written after the failure are written by the next successful fdatasync.
    REQUIRE(f->Write(0, std::string(4096, 'z')).ok());
    REQUIRE(f->Sync().ok());
    CHECK(fs.Contents("/d/a")->substr(4096, 4096) == std::string(4096, 'b'));  // reads see it
    fs.Crash();
    fs.Restart();
    const std::string c = *fs.Contents("/d/a");
    CHECK(c.substr(0, 4096) == std::string(4096, 'z'));
    for (int i = 1; i < 8; ++i) {
      if (c.substr(i * 4096, 4096) != std::string(4096, static_cast<char>('a' + i))) {
        ++lost_despite_retry;
        break;
      }
    }
  }
  CHECK(lost_despite_retry > 0);
}

TEST_CASE("sim fs: unsynced names survive as a prefix or a subset that respects dependencies",
          "[wal][simfs]") {
  for (DirOpOrder order : {DirOpOrder::kPrefix, DirOpOrder::kAnySubset}) {
    bool not_prefix = false;
    bool some_kept = false;
    for (std::uint64_t seed = 1; seed <= 200; ++seed) {
      SimFileSystem fs(0, CrashModel{4096, 512, order});
      REQUIRE(fs.CreateDir("/d").ok());
      auto old = Create(fs, "/d/old");
      REQUIRE(old->Sync().ok());
      REQUIRE(fs.SyncDir("/d").ok());
      // Unsynced, in order: create tmp, rename tmp -> seg, create x, remove old.
      auto tmp = Create(fs, "/d/tmp");
      REQUIRE(tmp->Write(0, "data").ok());
      REQUIRE(tmp->Sync().ok());
      REQUIRE(fs.Rename("/d/tmp", "/d/seg").ok());
      auto x = Create(fs, "/d/x");
      REQUIRE(fs.Remove("/d/old").ok());
      (void)fs.CrashRandom(seed);
      fs.Restart();
      const bool tmp_there = fs.Exists("/d/tmp");
      const bool seg_there = fs.Exists("/d/seg");
      const bool x_there = fs.Exists("/d/x");
      const bool old_gone = !fs.Exists("/d/old");
      INFO("seed " << seed);
      // Atomic rename, and never without the create it depends on.
      CHECK_FALSE((tmp_there && seg_there));
      if (seg_there) CHECK(*fs.Contents("/d/seg") == "data");
      const int survived = (tmp_there || seg_there) + seg_there + x_there + old_gone;
      const bool prefix = (survived >= 1) == (tmp_there || seg_there) &&
                          (survived >= 2) == seg_there && (survived >= 3) == x_there &&
                          (survived >= 4) == old_gone;
      not_prefix |= !prefix;
      some_kept |= survived > 0;
    }
    INFO("order " << static_cast<int>(order));
    CHECK(not_prefix == (order == DirOpOrder::kAnySubset));
    CHECK(some_kept);
  }
}

TEST_CASE("sim fs: fsync of a directory makes its pending names durable", "[wal][simfs]") {
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    SimFileSystem fs;
    REQUIRE(fs.CreateDir("/d").ok());
    REQUIRE(fs.CreateDir("/e").ok());
    auto a = Create(fs, "/d/a");
    auto b = Create(fs, "/e/b");
    REQUIRE(fs.Rename("/d/a", "/d/c").ok());
    REQUIRE(fs.SyncDir("/d").ok());
    (void)fs.CrashRandom(seed);
    fs.Restart();
    CHECK(fs.Exists("/d/c"));
    CHECK_FALSE(fs.Exists("/d/a"));
  }
}

TEST_CASE("sim fs: locks are exclusive and die with a crash", "[wal][simfs]") {
  SimFileSystem fs;
  REQUIRE(fs.CreateDir("/d").ok());
  auto l1 = fs.Lock("/d/LOCK");
  REQUIRE(l1.ok());
  CHECK(fs.Lock("/d/LOCK").status().Is(StatusCode::kUnavailable));
  fs.Crash();
  fs.Restart();
  CHECK(fs.Lock("/d/LOCK").ok());
}

TEST_CASE("fault injector: fail, fail once, and stall until released", "[wal][simfs]") {
  SimFileSystem fs;
  auto faults = std::make_shared<FaultInjector>();
  fs.SetFaultHook(faults);
  REQUIRE(fs.CreateDir("/d").ok());
  auto f = Create(fs, "/d/a.wal");

  faults->FailNext(FsOp::kWrite, Status::IOError("EIO"), 1, PathEndsWith(".wal"));
  CHECK(f->Write(0, "a").Is(StatusCode::kIOError));
  CHECK(f->Write(0, "a").ok());

  faults->FailAlways(FsOp::kSync, Status::IOError("EIO"));
  CHECK(f->Sync().Is(StatusCode::kIOError));
  CHECK(f->Sync().Is(StatusCode::kIOError));
  faults->Clear();
  CHECK(f->Sync().ok());

  faults->Stall(FsOp::kSync, PathContains("a.wal"));
  auto done = std::async(std::launch::async, [&] { return f->Sync(); });
  REQUIRE(faults->AwaitBlocked(1, std::chrono::seconds(10)));
  CHECK(done.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  faults->Release(FsOp::kSync);
  CHECK(done.get().ok());
  CHECK(faults->Count(FsOp::kSync) == 4);
}

}  // namespace
}  // namespace epoch::wal
