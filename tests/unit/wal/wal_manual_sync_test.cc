// Options::manual_sync: no threads; a request reaches the disk only when the owner calls
// SyncPending (the whole-node simulator decides when). What must hold: nothing written before it,
// callbacks on the caller's thread in order, rollover without the preallocator, power loss before
// SyncPending loses the requests and after it keeps them.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "epoch/wal/sim_file_system.h"
#include "epoch/wal/wal.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using testing::MakeEntries;

constexpr const char* kDir = "/data/wal";

Options Manual() {
  Options o;
  o.manual_sync = true;
  o.segment_bytes = 64 * 1024;                // small: the batches below roll over
  o.log = [](LogLevel, std::string_view) {};  // the crash case's fail-stop is expected
  return o;
}

TEST_CASE("manual sync: a request is durable only after SyncPending", "[wal][manual]") {
  SimFileSystem fs(7);
  auto wal = Wal::Open(fs, kDir, Manual());
  REQUIRE(wal.ok());
  std::vector<int> order;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  for (int i = 0; i < 3; ++i) {
    REQUIRE((*wal)
                ->Append(MakeEntries(static_cast<std::uint64_t>(i) * 10 + 1,
                                     static_cast<std::uint64_t>(i) * 10 + 10, 1, 512),
                         std::nullopt,
                         [&, i](const Status& s) {
                           CHECK(s.ok());
                           same_thread = same_thread && std::this_thread::get_id() == caller;
                           order.push_back(i);
                         })
                .ok());
  }
  CHECK((*wal)->HasPending());
  CHECK(order.empty());
  CHECK((*wal)->stats().frames == 0);

  CHECK((*wal)->SyncPending());
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(same_thread);
  CHECK_FALSE((*wal)->HasPending());
  CHECK_FALSE((*wal)->SyncPending());
  CHECK((*wal)->LastIndex() == LogIndex(30));
}

TEST_CASE("manual sync: rollover creates the next segment inline", "[wal][manual]") {
  SimFileSystem fs(8);
  auto wal = Wal::Open(fs, kDir, Manual());
  REQUIRE(wal.ok());
  for (std::uint64_t i = 0; i < 40; ++i) {
    REQUIRE((*wal)
                ->Append(MakeEntries(i * 10 + 1, i * 10 + 10, 1, 512), std::nullopt,
                         [](const Status& s) { CHECK(s.ok()); })
                .ok());
    REQUIRE((*wal)->SyncPending());
  }
  CHECK((*wal)->stats().rollovers > 0);
  CHECK((*wal)->stats().prealloc_waits == 0);
  CHECK((*wal)->Health().ok());
}

TEST_CASE("manual sync: power loss keeps what SyncPending wrote and loses the rest",
          "[wal][manual]") {
  SimFileSystem fs(9);
  {
    auto wal = Wal::Open(fs, kDir, Manual());
    REQUIRE(wal.ok());
    REQUIRE((*wal)->Append(MakeEntries(1, 20, 1, 256), std::nullopt, [](const Status&) {}).ok());
    REQUIRE((*wal)->SyncPending());
    int late = 0;
    REQUIRE((*wal)
                ->Append(MakeEntries(21, 40, 1, 256), std::nullopt,
                         [&](const Status& s) {
                           CHECK_FALSE(s.ok());  // the disk is gone: fail-stop, not a success
                           ++late;
                         })
                .ok());
    fs.CrashRandom(99);
    CHECK((*wal)->Close().ok() == false);  // drains into a dead file system
    CHECK(late == 1);
  }
  fs.Restart();
  auto reopened = Wal::Open(fs, kDir, Manual());
  REQUIRE(reopened.ok());
  CHECK((*reopened)->LastIndex() == LogIndex(20));
}

TEST_CASE("manual sync: Close writes what is queued", "[wal][manual]") {
  SimFileSystem fs(10);
  {
    auto wal = Wal::Open(fs, kDir, Manual());
    REQUIRE(wal.ok());
    bool done = false;
    REQUIRE((*wal)
                ->Append(MakeEntries(1, 5, 1), std::nullopt,
                         [&](const Status& s) {
                           CHECK(s.ok());
                           done = true;
                         })
                .ok());
    REQUIRE((*wal)->Close().ok());
    CHECK(done);
  }
  fs.Crash();
  fs.Restart();
  auto reopened = Wal::Open(fs, kDir, Manual());
  REQUIRE(reopened.ok());
  CHECK((*reopened)->LastIndex() == LogIndex(5));
}

}  // namespace
}  // namespace epoch::wal
