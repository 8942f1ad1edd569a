// Physical compaction off the apply path (src/compaction.h): the apply records the compact
// revision only; the compactor's batches remove the records later, resume after a restart or a
// snapshot install, and no answer depends on how far they got.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

const std::string kFromKey(1, '\0');

// No compactor thread: the test runs each batch (RunCompactionBatch), two entries at a time.
KvStoreOptions Manual() {
  KvStoreOptions o;
  o.background_compaction = false;
  o.compaction_batch_entries = 2;
  return o;
}

// 10 keys k0..k9, each written `rounds` times, k3 deleted in the middle and k7 deleted at the end:
// revisions 2 .. 10 * rounds + 3.
void WriteHistory(TestStore& s, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    for (int k = 0; k < 10; ++k) s.Put("k" + std::to_string(k), "v" + std::to_string(r));
    if (r == rounds / 2) s.Delete("k3");
  }
  s.Delete("k7");
}

int RunToEnd(TestStore& s) {
  int batches = 0;
  while (true) {
    Result<bool> more = s->RunCompactionBatch();
    REQUIRE(more.ok());
    ++batches;
    if (!*more) return batches;
  }
}

// Everything a client could read at or above `compact`, as text: a Range of every key at each
// revision, and the watch history from `compact` with prev_kv.
std::string Answers(TestStore& s, std::int64_t compact) {
  std::string out;
  const std::int64_t head = s->CurrentRevision().value();
  for (std::int64_t rev = compact; rev <= head; ++rev) {
    auto r = RangeReq("k", kFromKey);
    r.set_revision(rev);
    const pb::RangeResponse resp = s.Range(r);
    for (const auto& kv : resp.kvs()) {
      out += kv.key() + "=" + kv.value() + "@" + std::to_string(kv.mod_revision()) + " ";
    }
    out += "\n";
  }
  auto events = s->ReadEvents(Revision(compact), 1000, /*with_prev_kv=*/true);
  REQUIRE(events.ok());
  for (const auto& ev : events->events) {
    out += ev.kv().key() + ":" + std::to_string(ev.kv().mod_revision()) + ":" +
           (ev.has_prev_kv() ? ev.prev_kv().value() : "-") + " ";
  }
  return out;
}

void RequireCompacted(TestStore& s, std::int64_t below) {
  auto r = RangeReq("k", kFromKey);
  r.set_revision(below);
  auto read = s->Range(r);
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().message() == etcd_errors::kCompacted.message);
  auto events = s->ReadEvents(Revision(below), 10, false);
  REQUIRE_FALSE(events.ok());
  CHECK(events.status().message() == etcd_errors::kCompacted.message);
}

TEST_CASE("the apply of a compaction removes nothing; the compactor's batches do",
          "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path(), Manual());
  WriteHistory(s, 20);
  const std::size_t revisions = s->IndexSizeNow().revisions;
  const std::int64_t compact = s->CurrentRevision().value() - 15;
  const auto hash_before = s->HashKV(Revision(0));
  const auto state_before = s->StateHash();
  REQUIRE(hash_before.ok());
  REQUIRE(state_before.ok());

  REQUIRE(s.Compact(compact).status.ok());
  // The work done on the apply path: the compact revision recorded, not one record deleted.
  CHECK(s->compaction_metrics().records_deleted.load() == 0);
  CHECK(s->IndexSizeNow().revisions == revisions);
  CHECK(s->CompactRevision() == Revision(compact));
  CHECK(s->CompactFinishedRevision() == Revision(-1));
  // Yet every answer is already the compacted one.
  RequireCompacted(s, compact - 1);
  const std::string answers = Answers(s, compact);
  const auto hash_pending = s->HashKV(Revision(0));
  const auto state_pending = s->StateHash();
  REQUIRE(hash_pending.ok());
  REQUIRE(state_pending.ok());
  CHECK(hash_pending->hash != hash_before->hash);

  // Several batches of two, each answer unchanged after every one.
  int batches = 0;
  for (bool more = true; more; ++batches) {
    Result<bool> r = s->RunCompactionBatch();
    REQUIRE(r.ok());
    more = *r;
    CHECK(Answers(s, compact) == answers);
    CHECK(s->HashKV(Revision(0))->hash == hash_pending->hash);
    CHECK(*s->StateHash() == *state_pending);
  }
  CHECK(batches > 10);
  CHECK(s->CompactFinishedRevision() == Revision(compact));
  CHECK(s->compaction_metrics().records_deleted.load() == revisions - s->IndexSizeNow().revisions);
  // Left: each key's value as of `compact` and its later writes (k3 was put again after its
  // delete; k7's delete comes after `compact`).
  CHECK(s->IndexSizeNow().revisions == 10 + 15);
  CHECK_FALSE(*s->RunCompactionBatch());
}

TEST_CASE("a compaction the compactor left half done resumes after a restart",
          "[server][compact]") {
  TempDir dir;
  KvStoreOptions options = Manual();
  std::string answers;
  std::int64_t compact = 0;
  std::uint64_t state_hash = 0;
  {
    TestStore s(dir.path(), options);
    WriteHistory(s, 10);
    compact = s->CurrentRevision().value() - 5;
    REQUIRE(s.Compact(compact).status.ok());
    answers = Answers(s, compact);
    state_hash = *s->StateHash();
    // One batch, then the store stops (the hook: no thread, so nothing else runs).
    REQUIRE(*s->RunCompactionBatch());
    REQUIRE(s->Flush().ok());
  }
  SECTION("by its own thread") {
    options.background_compaction = true;
    TestStore s(dir.path(), options);
    std::promise<Status> done;
    s->WhenCompacted(Revision(compact), [&done](const Status& st) { done.set_value(st); });
    auto finished = done.get_future();
    REQUIRE(finished.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
    CHECK(finished.get().ok());
    CHECK(s->CompactFinishedRevision() == Revision(compact));
    CHECK(s->IndexSizeNow().revisions == 10 + 5);
    CHECK(Answers(s, compact) == answers);
    CHECK(*s->StateHash() == state_hash);
    RequireCompacted(s, compact - 1);
  }
  SECTION("batch by batch") {
    TestStore s(dir.path(), options);
    CHECK(s->CompactRevision() == Revision(compact));
    CHECK(s->CompactFinishedRevision() == Revision(-1));
    CHECK(Answers(s, compact) == answers);
    RunToEnd(s);
    CHECK(s->CompactFinishedRevision() == Revision(compact));
    CHECK(s->IndexSizeNow().revisions == 10 + 5);
    CHECK(Answers(s, compact) == answers);
    // The marker is durable: the next open has nothing to do.
    s.Reopen();
    CHECK(s->CompactFinishedRevision() == Revision(compact));
    CHECK_FALSE(*s->RunCompactionBatch());
  }
}

TEST_CASE("a snapshot taken during a compaction carries it; the installer finishes it",
          "[server][compact][snapshot]") {
  TempDir dir;
  TestStore a(dir.path() + "/a", Manual());
  WriteHistory(a, 10);
  const std::int64_t compact = a->CurrentRevision().value() - 5;
  REQUIRE(a.Compact(compact).status.ok());
  REQUIRE(*a->RunCompactionBatch());
  REQUIRE(a->CreateCheckpoint(dir.path() + "/image").ok());
  const std::string answers = Answers(a, compact);

  TestStore b(dir.path() + "/b", Manual());
  REQUIRE(b->ReplaceWithCheckpoint(dir.path() + "/image").ok());
  CHECK(b->CompactRevision() == Revision(compact));
  CHECK(b->CompactFinishedRevision() < Revision(compact));
  CHECK(b->IndexSizeNow().revisions > 10 + 5);  // the leftovers came along
  RequireCompacted(b, compact - 1);
  CHECK(Answers(b, compact) == answers);
  CHECK(b->HashKV(Revision(0))->hash == a->HashKV(Revision(0))->hash);
  CHECK(*b->StateHash() == *a->StateHash());

  RunToEnd(b);
  RunToEnd(a);
  CHECK(b->CompactFinishedRevision() == Revision(compact));
  CHECK(b->IndexSizeNow().revisions == a->IndexSizeNow().revisions);
  CHECK(Answers(b, compact) == answers);
  CHECK(*b->StateHash() == *a->StateHash());
}

TEST_CASE("a second compaction moves the compactor on to the later target", "[server][compact]") {
  TempDir dir;
  TestStore twice(dir.path() + "/twice", Manual());
  TestStore once(dir.path() + "/once", Manual());
  for (TestStore* s : {&twice, &once}) WriteHistory(*s, 10);
  const std::int64_t head = twice->CurrentRevision().value();
  REQUIRE(twice.Compact(head - 40).status.ok());
  REQUIRE(*twice->RunCompactionBatch());
  REQUIRE(twice.Compact(head - 5).status.ok());
  REQUIRE(once.Compact(head - 5).status.ok());
  RunToEnd(twice);
  RunToEnd(once);
  CHECK(twice->CompactFinishedRevision() == Revision(head - 5));
  CHECK(twice->IndexSizeNow().revisions == once->IndexSizeNow().revisions);
  CHECK(twice->HashKV(Revision(0))->hash == once->HashKV(Revision(0))->hash);
  CHECK(Answers(twice, head - 5) == Answers(once, head - 5));
}

TEST_CASE("WhenCompacted answers once the records are gone (Compact physical=true)",
          "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path(), Manual());
  WriteHistory(s, 4);
  const std::int64_t compact = s->CurrentRevision().value() - 3;
  std::vector<Status> answered;
  s->WhenCompacted(Revision(-1), [&](const Status& st) { answered.push_back(st); });
  REQUIRE(answered.size() == 1);  // nothing to wait for: at once
  REQUIRE(s.Compact(compact).status.ok());
  s->WhenCompacted(Revision(compact), [&](const Status& st) { answered.push_back(st); });
  s->WhenCompacted(Revision(compact + 1), [&](const Status& st) { answered.push_back(st); });
  CHECK(answered.size() == 1);
  REQUIRE(*s->RunCompactionBatch());
  CHECK(answered.size() == 1);  // one batch is not the whole compaction
  RunToEnd(s);
  REQUIRE(answered.size() == 2);
  CHECK(answered[1].ok());
  // A target never compacted: answered Unavailable when the store closes.
  s->StopCompactor();
  REQUIRE(answered.size() == 3);
  CHECK(answered[2].code() == StatusCode::kUnavailable);
}

}  // namespace
}  // namespace epoch::server
