// PosixFileSystem on a real directory under /tmp: basic operations, the directory lock, and the
// fault hook that the server's chaos failpoints use (an injected EIO makes the WAL fail-stop).
#include "epoch/wal/posix_file_system.h"

#include <catch2/catch.hpp>

#include "epoch/test_support/temp_dir.h"
#include "epoch/wal/fault_injector.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using test_support::TempDir;

TEST_CASE("posix fs: files, renames, listing and the directory lock", "[wal][posixfs]") {
  TempDir dir("epoch-posixfs");
  PosixFileSystem fs;
  const std::string a = JoinPath(dir.path(), "a");
  auto f = fs.Open(a, OpenMode::kCreateExclusive);
  REQUIRE(f.ok());
  CHECK_FALSE(fs.Open(a, OpenMode::kCreateExclusive).ok());
  REQUIRE((*f)->Write(10, "hello").ok());
  REQUIRE((*f)->Sync().ok());
  CHECK(*(*f)->Size() == 15);
  REQUIRE((*f)->Allocate(4096).ok());
  CHECK(*(*f)->Size() == 4096);
  auto all = ReadWholeFile(**f);
  REQUIRE(all.ok());
  CHECK(all->substr(0, 15) == std::string(10, '\0') + "hello");
  REQUIRE(fs.Rename(a, JoinPath(dir.path(), "b")).ok());
  REQUIRE(fs.SyncDir(dir.path()).ok());
  auto names = fs.ListDir(dir.path());
  REQUIRE(names.ok());
  CHECK(*names == std::vector<std::string>{"b"});
  CHECK(fs.Open(a, OpenMode::kRead).status().Is(StatusCode::kNotFound));

  auto lock = fs.Lock(JoinPath(dir.path(), "LOCK"));
  REQUIRE(lock.ok());
  CHECK(fs.Lock(JoinPath(dir.path(), "LOCK")).status().Is(StatusCode::kUnavailable));
  lock->reset();
  CHECK(fs.Lock(JoinPath(dir.path(), "LOCK")).ok());
}

TEST_CASE("posix fs: an injected fdatasync EIO makes a real WAL fail-stop", "[wal][posixfs]") {
  TempDir dir("epoch-posixfs");
  PosixFileSystem fs;
  auto faults = std::make_shared<FaultInjector>();
  fs.SetFaultHook(faults);  // installed at run time, as a chaos failpoint would
  Options o;
  o.segment_bytes = 64 * 1024;
  o.log = [](LogLevel, std::string_view) {};
  auto wal = Wal::Open(fs, JoinPath(dir.path(), "wal"), o);
  REQUIRE(wal.ok());
  REQUIRE(testing::AppendDurably(**wal, testing::MakeEntries(1, 3, 1)).ok());
  faults->FailNext(FsOp::kSync, Status::IOError("fdatasync: EIO (injected)"), 1,
                   PathEndsWith(".wal"));
  CHECK(testing::AppendDurably(**wal, testing::MakeEntries(4, 4, 1)).Is(StatusCode::kIOError));
  CHECK(testing::AppendDurably(**wal, testing::MakeEntries(5, 5, 1)).Is(StatusCode::kIOError));
  CHECK_FALSE((*wal)->Close().ok());
  // After a restart the WAL holds what is really on disk.
  auto reopened = Wal::Open(fs, JoinPath(dir.path(), "wal"), o);
  REQUIRE(reopened.ok());
  CHECK((*reopened)->LastIndex() >= LogIndex(3));
}

}  // namespace
}  // namespace epoch::wal
