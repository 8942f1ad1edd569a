// WalLog: how the driver's Ready maps onto WAL requests — in particular that a commit-only Ready
// (sync == false) costs no fdatasync and its hard state rides on the next synced request.
#include "epoch/replication/wal_log.h"

#include <catch2/catch.hpp>
#include <future>

#include "epoch/wal/sim_file_system.h"
#include "epoch/wal/wal.h"

namespace epoch::server {
namespace {

constexpr const char* kDir = "/wal";

std::unique_ptr<wal::Wal> OpenWal(wal::FileSystem& fs) {
  wal::Options o;
  o.segment_bytes = 1 << 16;
  o.log = [](wal::LogLevel, std::string_view) {};
  auto w = wal::Wal::Open(fs, kDir, std::move(o));
  INFO(w.status().ToString());
  REQUIRE(w.ok());
  return std::move(w).value();
}

raft::Entry Entry(std::uint64_t index) {
  return raft::Entry{Term(1), LogIndex(index), raft::EntryType::kNormal, "x"};
}

raft::HardState Hs(std::uint64_t commit) { return {Term(1), NodeId(7), LogIndex(commit)}; }

// Persists and waits for `done`; returns whether `done` ran before Persist returned.
bool PersistAndWait(WalLog& log, std::vector<raft::Entry> entries,
                    std::optional<raft::HardState> hs, bool sync) {
  std::promise<Status> done;
  std::future<Status> result = done.get_future();
  log.Persist(std::nullopt, entries, hs, sync, [&done](Status s) { done.set_value(s); });
  const bool inline_done = result.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  REQUIRE(result.get().ok());
  return inline_done;
}

TEST_CASE("a commit-only Ready is not synced and its hard state rides on the next append",
          "[node][wal_log]") {
  wal::SimFileSystem fs;
  {
    auto w = OpenWal(fs);
    WalLog log(*w);
    PersistAndWait(log, {Entry(1), Entry(2)}, Hs(0), /*sync=*/true);
    const std::uint64_t frames = w->stats().frames;
    CHECK(PersistAndWait(log, {}, Hs(2), /*sync=*/false));  // answered at once
    CHECK(w->stats().frames == frames);                     // no group commit, no fdatasync
  }
  fs.Crash();
  fs.Restart();
  {
    auto w = OpenWal(fs);
    // The commit-only update was never written: the older commit is what recovery finds. Safe
    // (commit is a hint), and what makes the saving possible.
    CHECK(w->InitialHardState() == Hs(0));
    CHECK(w->LastIndex() == LogIndex(2));
    WalLog log(*w);
    CHECK(PersistAndWait(log, {}, Hs(2), /*sync=*/false));
    PersistAndWait(log, {Entry(3)}, std::nullopt, /*sync=*/true);
  }
  fs.Crash();
  fs.Restart();
  auto w = OpenWal(fs);
  CHECK(w->InitialHardState() == Hs(2));  // written with entry 3
  CHECK(w->LastIndex() == LogIndex(3));
}

TEST_CASE("a synced hard state replaces a deferred commit-only one", "[node][wal_log]") {
  wal::SimFileSystem fs;
  {
    auto w = OpenWal(fs);
    WalLog log(*w);
    PersistAndWait(log, {Entry(1)}, Hs(0), true);
    PersistAndWait(log, {}, Hs(1), false);
    const std::uint64_t frames = w->stats().frames;
    PersistAndWait(log, {}, raft::HardState{Term(2), NodeId(9), LogIndex(1)}, true);
    CHECK(w->stats().frames == frames + 1);  // a vote is synced
  }
  fs.Crash();
  fs.Restart();
  auto w = OpenWal(fs);
  CHECK(w->InitialHardState() == raft::HardState{Term(2), NodeId(9), LogIndex(1)});
}

}  // namespace
}  // namespace epoch::server
