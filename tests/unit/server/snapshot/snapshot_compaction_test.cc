// Automatic log compaction policy (server/SNAPSHOT.md §4) and the state-machine side of a
// snapshot install (KvStore::ReplaceWithCheckpoint), on a real RocksDB.
#include "epoch/snapshot/snapshot_compaction.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using namespace snapshot_testing;

CompactionOptions Options() {
  CompactionOptions o;
  o.trigger_entries = 1000;
  o.trigger_bytes = 1 << 20;
  o.keep_entries = 300;
  return o;
}

CompactionInput Input(std::uint64_t snapshot, std::uint64_t applied, std::uint64_t bytes = 0,
                      std::uint64_t conf = 0) {
  return CompactionInput{LogIndex(snapshot), LogIndex(applied), bytes, LogIndex(conf)};
}

}  // namespace

TEST_CASE("compaction: triggers at the entry count and keeps the catch-up tail", "[snapshot]") {
  CHECK(!CompactionTarget(Options(), Input(1, 1000)));  // 999 entries past the snapshot
  CHECK(CompactionTarget(Options(), Input(1, 1001)) == LogIndex(701));
  CHECK(CompactionTarget(Options(), Input(5000, 7000)) == LogIndex(6700));
  // Nothing applied past the snapshot (e.g. right after installing one): nothing to do.
  CHECK(!CompactionTarget(Options(), Input(800, 800, 1 << 30)));
}

TEST_CASE("compaction: a small --snapshot-count still keeps the whole catch-up tail",
          "[snapshot]") {
  // Regression: with a trigger of 100 the tail was min(300, past / 2) = 50 entries, and a member
  // installing a snapshot under load found the leader's log already compacted past it, forever.
  CompactionOptions small = Options();
  small.trigger_entries = 100;
  CHECK(!CompactionTarget(small, Input(1, 101)));  // 100 past: less than 300 + 50
  CHECK(!CompactionTarget(small, Input(1, 350)));
  CHECK(CompactionTarget(small, Input(1, 351)) == LogIndex(51));  // the 300-entry tail stays
  // Then every 50 entries (half the trigger), each keeping 300.
  CHECK(!CompactionTarget(small, Input(51, 400)));
  CHECK(CompactionTarget(small, Input(51, 401)) == LogIndex(101));
  // A trigger larger than tail + half of it is unchanged: due at the trigger.
  CHECK(CompactionTarget(Options(), Input(1, 1001)) == LogIndex(701));
}

TEST_CASE("compaction: the byte trigger frees at least half of a short log", "[snapshot]") {
  CHECK(!CompactionTarget(Options(), Input(100, 110, (1 << 20) - 1)));
  // 10 huge entries: keep min(300, 10 / 2) = 5.
  CHECK(CompactionTarget(Options(), Input(100, 110, 1 << 20)) == LogIndex(105));
  // A single huge entry is compacted whole (no tail to keep).
  CHECK(CompactionTarget(Options(), Input(100, 101, 1 << 30)) == LogIndex(101));
  CompactionOptions no_bytes = Options();
  no_bytes.trigger_bytes = 0;
  CHECK(!CompactionTarget(no_bytes, Input(100, 110, 1ULL << 40)));
}

TEST_CASE("compaction: never past a membership change newer than the target", "[snapshot]") {
  CHECK(CompactionTarget(Options(), Input(1, 2000, 0, 1700)) == LogIndex(1700));
  CHECK(!CompactionTarget(Options(), Input(1, 2000, 0, 1701)));
}

TEST_CASE("compaction: disabled means never", "[snapshot]") {
  CompactionOptions off = Options();
  off.enabled = false;
  CHECK(!CompactionTarget(off, Input(1, 1'000'000, 1ULL << 40)));
}

TEST_CASE("install: ReplaceWithCheckpoint swaps the whole state in place, durably", "[snapshot]") {
  TempDir tmp;
  std::uint64_t leader_hash = 0;
  {
    auto leader = OpenStore(tmp.Sub("leader"));
    for (std::uint64_t i = 1; i <= 40; ++i) Put(*leader, i + 1, fmt::format("k{}", i), "new");
    REQUIRE(leader->CreateCheckpoint(tmp.Sub("ckpt")).ok());
    auto hash = leader->StateHash();
    REQUIRE(hash.ok());
    leader_hash = *hash;
  }
  KvStoreOptions crashy;
  crashy.skip_flush_on_close = true;  // closing = a crash: only flushed state survives
  {
    auto follower = OpenStore(tmp.Sub("follower"), crashy);
    Put(*follower, 2, "k1", "old");
    Put(*follower, 3, "only-on-follower", "x");
    REQUIRE(follower->ReplaceWithCheckpoint(tmp.Sub("ckpt")).ok());
    CHECK(!std::filesystem::exists(tmp.Sub("ckpt") + ".ingest.sst"));  // moved into the store
    CHECK(follower->AppliedIndex() == LogIndex(41));
    CHECK(Get(*follower, "k1") == "new");
    CHECK(Get(*follower, "k40") == "new");
    CHECK(!Get(*follower, "only-on-follower"));
    auto hash = follower->StateHash();
    REQUIRE(hash.ok());
    CHECK(*hash == leader_hash);
  }
  auto reopened = OpenStore(tmp.Sub("follower"));
  CHECK(reopened->AppliedIndex() == LogIndex(41));
  CHECK(Get(*reopened, "k40") == "new");
  CHECK(!Get(*reopened, "only-on-follower"));
  auto hash = reopened->StateHash();
  REQUIRE(hash.ok());
  CHECK(*hash == leader_hash);
}

TEST_CASE("install: an image older than the store is refused and changes nothing", "[snapshot]") {
  TempDir tmp;
  {
    auto old_store = OpenStore(tmp.Sub("old"));
    Put(*old_store, 2, "k", "old");
    REQUIRE(old_store->CreateCheckpoint(tmp.Sub("ckpt")).ok());
  }
  auto store = OpenStore(tmp.Sub("store"));
  for (std::uint64_t i = 2; i <= 10; ++i) Put(*store, i, "k", fmt::format("v{}", i));
  Status s = store->ReplaceWithCheckpoint(tmp.Sub("ckpt"));
  CHECK(s.Is(StatusCode::kFailedPrecondition));
  CHECK(store->AppliedIndex() == LogIndex(10));
  CHECK(Get(*store, "k") == "v10");
  CHECK(!store->ReplaceWithCheckpoint(tmp.Sub("missing")).ok());
}

}  // namespace epoch::server

namespace epoch::server {

TEST_CASE("install: concurrent readers see the old state or the new one, never a mix",
          "[snapshot]") {
  using namespace snapshot_testing;
  TempDir tmp;
  constexpr int kKeys = 200;
  {
    auto leader = OpenStore(tmp.Sub("leader"));
    for (int i = 0; i < kKeys; ++i) Put(*leader, 1000 + i, fmt::format("k{:03}", i), "new");
    REQUIRE(leader->CreateCheckpoint(tmp.Sub("ckpt")).ok());
  }
  auto follower = OpenStore(tmp.Sub("follower"));
  for (int i = 0; i < kKeys; ++i) Put(*follower, 2 + i, fmt::format("k{:03}", i), "old");

  std::atomic<bool> installed{false};
  std::atomic<int> reads_after{0};
  std::atomic<int> mixed{0};
  std::atomic<int> wrong_count{0};
  std::thread reader([&] {
    etcdserverpb::RangeRequest request;
    request.set_key("k");
    request.set_range_end("l");
    // Bounded: stops 20 reads after the install, or after 100,000 reads in all.
    for (int n = 0; n < 100'000 && reads_after.load() < 20; ++n) {
      const bool after = installed.load();
      auto response = follower->Range(request);
      if (!response.ok() || response->kvs_size() != kKeys) {
        ++wrong_count;
        continue;
      }
      const std::string& first = response->kvs(0).value();
      for (const auto& kv : response->kvs()) {
        if (kv.value() != first) {
          ++mixed;
          break;
        }
      }
      if (after) {
        if (first != "new") ++mixed;
        ++reads_after;
      }
    }
  });
  REQUIRE(follower->ReplaceWithCheckpoint(tmp.Sub("ckpt")).ok());
  installed = true;
  reader.join();
  CHECK(reads_after.load() == 20);
  CHECK(mixed.load() == 0);
  CHECK(wrong_count.load() == 0);
  CHECK(follower->AppliedIndex() == LogIndex(1000 + kKeys - 1));
}

}  // namespace epoch::server
