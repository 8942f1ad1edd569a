// Applied index and state survive restarts; a crash (close without flushing RocksDB's memtable,
// whose WAL is off) rolls the store back to a consistent earlier applied index, from which the
// Raft log replays; checkpoints reopen as the same state; concurrent readers see whole batches.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

v1::InternalRequest PutCmd(const std::string& key, const std::string& value) {
  v1::InternalRequest req;
  *req.mutable_put() = PutReq(key, value);
  req.set_cluster_time_ms(1);
  return req;
}

// The log the tests replay: entry i (1-based) writes key "k<i % 7>" = "v<i>".
v1::InternalRequest LogEntry(int i) {
  return PutCmd("k" + std::to_string(i % 7), "v" + std::to_string(i));
}

TEST_CASE("a clean close and reopen keeps applied index, revision and data",
          "[server][durability]") {
  TempDir dir;
  TestStore s(dir.path());
  for (int i = 1; i <= 20; ++i) s.Apply(LogEntry(i));
  REQUIRE(s.Compact(10).status.ok());  // index 21
  const auto hash = s->StateHash();
  REQUIRE(hash.ok());
  s.Reopen();
  CHECK(s->AppliedIndex() == LogIndex(21));
  CHECK(s->CurrentRevision() == Revision(21));
  CHECK(s->CompactRevision() == Revision(10));
  CHECK(*s->StateHash() == *hash);
  CHECK(s.Get("k6").kvs(0).value() == "v20");
}

TEST_CASE("a crash loses only unflushed batches, and state matches the applied index",
          "[server][durability]") {
  TempDir crashed_dir;
  KvStoreOptions crash;
  crash.skip_flush_on_close = true;
  TestStore s(crashed_dir.path(), crash);
  for (int i = 1; i <= 30; ++i) s.Apply(LogEntry(i));
  auto durable = s->Flush();
  REQUIRE(durable.ok());
  CHECK(*durable == LogIndex(30));
  for (int i = 31; i <= 45; ++i) s.Apply(LogEntry(i));
  CHECK(s->AppliedIndex() == LogIndex(45));
  s.Reopen();  // crash: the memtable with entries 31..45 is gone
  CHECK(s->AppliedIndex() == LogIndex(30));
  CHECK(s->CurrentRevision() == Revision(31));

  // The state is exactly what a store that applied entries 1..30 has.
  TempDir ref_dir;
  TestStore ref(ref_dir.path());
  for (int i = 1; i <= 30; ++i) ref.Apply(LogEntry(i));
  CHECK(*s->StateHash() == *ref->StateHash());

  // Replaying the log from AppliedIndex()+1 converges with a store that never crashed.
  for (int i = 31; i <= 45; ++i) s.Apply(LogEntry(i));
  for (int i = 31; i <= 45; ++i) ref.Apply(LogEntry(i));
  CHECK(*s->StateHash() == *ref->StateHash());
  CHECK(s.Get("k3").kvs(0).value() == "v45");
}

TEST_CASE("a crash before any flush leaves an empty store at index 0", "[server][durability]") {
  TempDir dir;
  KvStoreOptions crash;
  crash.skip_flush_on_close = true;
  TestStore s(dir.path(), crash);
  for (int i = 1; i <= 5; ++i) s.Apply(LogEntry(i));
  s.Reopen();
  CHECK(s->AppliedIndex() == LogIndex(0));
  CHECK(s->CurrentRevision() == Revision(1));
  CHECK(s.Range(RangeReq("k", "l")).count() == 0);
}

TEST_CASE("entries at or below the applied index are refused", "[server][durability]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Apply(LogEntry(1));
  auto again = s->Apply(LogIndex(1), LogEntry(1));
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().Is(StatusCode::kFailedPrecondition));
  CHECK(s->ApplyEmpty(LogIndex(1)).Is(StatusCode::kFailedPrecondition));
  REQUIRE(s->ApplyEmpty(LogIndex(5)).ok());
  CHECK(s->AppliedIndex() == LogIndex(5));
  CHECK(s->CurrentRevision() == Revision(2));
}

TEST_CASE("a batch applies entries in order and rolls back only the failing one",
          "[server][durability]") {
  TempDir dir;
  TestStore s(dir.path());
  std::vector<v1::InternalRequest> reqs = {PutCmd("a", "1"), PutCmd("", "bad"), PutCmd("b", "2")};
  v1::InternalRequest txn;  // sees "a" from the first entry of the same batch
  auto* cmp = txn.mutable_txn()->add_compare();
  cmp->set_key("a");
  cmp->set_target(etcdserverpb::Compare::VALUE);
  cmp->set_value("1");
  *txn.mutable_txn()->add_success()->mutable_request_put() = PutReq("c", "3");
  reqs.push_back(txn);
  std::vector<ApplyInput> inputs;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    inputs.push_back(ApplyInput{LogIndex(10 + i), &reqs[i]});
  }
  auto results = s->ApplyBatch(inputs);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 4);
  CHECK((*results)[0].revision == Revision(2));
  CHECK((*results)[1].status.message() == epoch::etcd_errors::kEmptyKey.message);
  CHECK((*results)[1].revision == Revision(2));
  CHECK((*results)[2].revision == Revision(3));
  CHECK((*results)[3].response.txn().succeeded());
  CHECK((*results)[3].revision == Revision(4));
  CHECK(s->AppliedIndex() == LogIndex(13));
  CHECK(s.Get("c").kvs(0).mod_revision() == 4);
}

TEST_CASE("checkpoint opens as an identical store", "[server][durability][snapshot]") {
  TempDir dir;
  TestStore s(dir.Sub("live"));
  REQUIRE(s.GrantLease(3, 10'000).status.ok());
  for (int i = 1; i <= 25; ++i) s.Apply(LogEntry(i));
  s.Put("leased", "x", 3);
  auto index = s->CreateCheckpoint(dir.Sub("checkpoint"));
  REQUIRE(index.ok());
  CHECK(index->applied == s->AppliedIndex());
  const auto hash = *s->StateHash();
  s.Put("after", "checkpoint");  // not in the checkpoint

  auto restored = KvStore::OpenFromCheckpoint(dir.Sub("checkpoint"), dir.Sub("restored"), {});
  REQUIRE(restored.ok());
  KvStore& r = **restored;
  CHECK(r.AppliedIndex() == index->applied);
  CHECK(*r.StateHash() == hash);
  CHECK(r.CurrentRevision() == Revision(27));
  auto keys = r.LeaseKeys(LeaseId(3));
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"leased"});
  auto after = r.Range(RangeReq("after"));
  REQUIRE(after.ok());
  CHECK(after->kvs_size() == 0);
}

TEST_CASE("replicas applying the same log have the same hashes", "[server][durability]") {
  TempDir d1;
  TempDir d2;
  TestStore a(d1.path());
  TestStore b(d2.path());
  for (int i = 1; i <= 40; ++i) a.Apply(LogEntry(i));
  // b applies the same entries in batches of 8: batching must not change the state.
  std::vector<v1::InternalRequest> log;
  for (int i = 1; i <= 40; ++i) log.push_back(LogEntry(i));
  for (int first = 1; first <= 40; first += 8) {
    std::vector<ApplyInput> batch;
    for (int i = first; i < first + 8; ++i) batch.push_back(ApplyInput{LogIndex(i), &log[i - 1]});
    REQUIRE(b->ApplyBatch(batch).ok());
  }
  CHECK(b->AppliedIndex() == LogIndex(40));
  b.Reopen();
  CHECK(*a->StateHash() == *b->StateHash());
  CHECK(a->HashKV(Revision(0))->hash == b->HashKV(Revision(0))->hash);
  CHECK(a->HashKV(Revision(20))->hash != a->HashKV(Revision(21))->hash);
  b.Apply(LogEntry(41));
  CHECK(*a->StateHash() != *b->StateHash());
  auto future = a->HashKV(Revision(99));
  REQUIRE_FALSE(future.ok());
  CHECK(future.status().message() == epoch::etcd_errors::kFutureRev.message);
}

// A batch writes only the meta values it changes: a compact revision, cluster time or revision
// set many batches earlier (or brought by a snapshot image) must still be what a crash restores.
TEST_CASE("meta values that later batches leave unchanged survive a crash",
          "[server][durability]") {
  TempDir dir;
  KvStoreOptions crash;
  crash.skip_flush_on_close = true;
  TestStore s(dir.Sub("live"), crash);
  s.set_clock_ms(500);
  for (int i = 1; i <= 10; ++i) s.Apply(LogEntry(i));  // cluster time 1 (LogEntry stamps it)
  REQUIRE(s.Compact(6).status.ok());                   // index 11
  s.set_clock_ms(0);
  for (int i = 12; i <= 20; ++i) s.Apply(LogEntry(i));  // revision moves, compaction does not
  REQUIRE(s->ApplyEmpty(LogIndex(21)).ok());            // only the applied index moves
  REQUIRE(s->Flush().ok());
  const auto hash = *s->StateHash();
  s.Reopen();
  CHECK(s->AppliedIndex() == LogIndex(21));
  CHECK(s->CurrentRevision() == Revision(20));
  CHECK(s->CompactRevision() == Revision(6));
  CHECK(s->ClusterTimeMs() == 500);
  CHECK(*s->StateHash() == hash);

  // A store that took a snapshot image, then applied more batches, reopens with the image's
  // compact revision and clock and its own applied index.
  REQUIRE(s->CreateCheckpoint(dir.Sub("image")).ok());
  TestStore f(dir.Sub("follower"), crash);
  f.Put("old", "state");
  REQUIRE(f->ReplaceWithCheckpoint(dir.Sub("image")).ok());
  v1::InternalRequest next = LogEntry(22);
  REQUIRE(f->Apply(LogIndex(22), next).ok());
  REQUIRE(f->Flush().ok());
  f.Reopen();
  CHECK(f->AppliedIndex() == LogIndex(22));
  CHECK(f->CurrentRevision() == Revision(21));
  CHECK(f->CompactRevision() == Revision(6));
  CHECK(f->ClusterTimeMs() == 500);
  CHECK(f.Get("old").kvs_size() == 0);
}

TEST_CASE("concurrent readers always see a whole applied batch", "[server][durability]") {
  TempDir dir;
  TestStore s(dir.path());
  // Every entry is a txn writing x and y to the same value; a reader must never see them differ,
  // and the header revision must match the kvs it returns.
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  std::atomic<int> torn{0};
  std::thread reader([&] {
    while (!done.load()) {
      auto r = s->Range(RangeReq("x", "z"));
      if (!r.ok()) {
        ++torn;
        continue;
      }
      ++reads;
      if (r->kvs_size() == 2) {
        if (r->kvs(0).value() != r->kvs(1).value()) ++torn;
        if (r->kvs(0).mod_revision() != r->header().revision()) ++torn;
      }
    }
  });
  // At least 300 batches, and keep going (bounded) until the reader has overlapped enough.
  for (int i = 0; i < 300 || (reads.load() < 100 && i < 100'000); ++i) {
    etcdserverpb::TxnRequest t;
    *t.add_success()->mutable_request_put() = PutReq("x", std::to_string(i));
    *t.add_success()->mutable_request_put() = PutReq("y", std::to_string(i));
    REQUIRE(s.Txn(t).status.ok());
  }
  done = true;
  reader.join();
  CHECK(torn.load() == 0);
  CHECK(reads.load() >= 100);
}

}  // namespace
}  // namespace epoch::server
