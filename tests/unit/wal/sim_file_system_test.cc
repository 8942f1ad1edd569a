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
