// Compaction and history reads for Watch (docs/etcd-compatibility.md §3.3, §3.5).
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

const std::string kFromKey(1, '\0');

TEST_CASE("compaction keeps each key's value as of the compact revision", "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");  // 2
  s.Put("a", "2");  // 3
  s.Put("b", "1");  // 4
  s.Delete("b");    // 5
  s.Put("c", "1");  // 6
  s.Put("a", "3");  // 7
  const auto hash_before = s->HashKV(Revision(7));
  REQUIRE(hash_before.ok());

  ApplyResult r = s.Compact(6);
  REQUIRE(r.status.ok());
  CHECK(r.response.compaction().header().revision() == 7);
  CHECK(r.revision == Revision(7));  // compaction does not bump the revision
  CHECK(s->CompactRevision() == Revision(6));

  auto at6 = RangeReq("a", kFromKey);
  at6.set_revision(6);
  auto resp = s.Range(at6);
  CHECK(Keys(resp) == std::vector<std::string>{"a", "c"});
  CHECK(resp.kvs(0).value() == "2");
  CHECK(resp.kvs(0).version() == 2);
  at6.set_revision(7);
  CHECK(s.Range(at6).kvs(0).value() == "3");
  at6.set_revision(5);
  auto compacted = s->Range(at6);
  REQUIRE_FALSE(compacted.ok());
  CHECK(compacted.status().message() == epoch::etcd_errors::kCompacted.message);

  // The kept versions still produce the same current state and prev_kv lookups.
  auto events = s->ReadEvents(Revision(7), 10, /*with_prev_kv=*/true);
  REQUIRE(events.ok());
  REQUIRE(events->events.size() == 1);
  CHECK(events->events[0].prev_kv().value() == "2");
  // Compaction changed the history below 6, so the hash of revision 7 changes.
  const auto hash_after = s->HashKV(Revision(7));
  REQUIRE(hash_after.ok());
  CHECK(hash_after->compact_revision == Revision(6));
  CHECK(hash_after->hash != hash_before->hash);
}

TEST_CASE("compacting at or below the compact revision, or in the future, fails",
          "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");
  s.Put("a", "2");  // 3
  CHECK(s.Compact(4).status.message() == std::string(epoch::etcd_errors::kFutureRev.message));
  REQUIRE(s.Compact(2).status.ok());
  CHECK(s.Compact(2).status.message() == epoch::etcd_errors::kCompacted.message);
  CHECK(s.Compact(1).status.message() == epoch::etcd_errors::kCompacted.message);
  CHECK(s.Compact(3).status.ok());
  CHECK(s->CompactRevision() == Revision(3));
}

TEST_CASE("a fresh store can be compacted at its current revision", "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(s->CompactRevision() == Revision(-1));
  CHECK(s.Compact(1).status.ok());
  CHECK(s.Get("a").header().revision() == 1);
}

TEST_CASE("deleted keys disappear from history after compaction", "[server][compact]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("gone", "1");  // 2
  s.Delete("gone");    // 3
  s.Put("x", "1");     // 4
  REQUIRE(s.Compact(4).status.ok());
  auto r = RangeReq("a", kFromKey);
  r.set_revision(4);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"x"});
  // A later compaction is still consistent.
  s.Put("gone", "again");  // 5
  REQUIRE(s.Compact(5).status.ok());
  CHECK(s.Get("gone").kvs(0).create_revision() == 5);
  CHECK(s.Get("gone").kvs(0).version() == 1);
}

TEST_CASE("ReadEvents replays history inclusively and never splits a revision",
          "[server][compact][events]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");             // 2
  etcdserverpb::TxnRequest t;  // 3: three events
  *t.add_success()->mutable_request_put() = PutReq("b", "1");
  *t.add_success()->mutable_request_put() = PutReq("c", "1");
  t.add_success()->mutable_request_delete_range()->set_key("a");
  s.Txn(t);
  s.Put("d", "1");  // 4

  auto all = s->ReadEvents(Revision(2), 100, true);
  REQUIRE(all.ok());
  CHECK(all->events.size() == 5);
  CHECK(all->revisions.front() == Revision(2));
  CHECK(all->next == Revision(5));
  CHECK(all->current == Revision(4));
  CHECK(all->events[3].type() == mvccpb::Event::DELETE);
  CHECK(all->events[3].kv().mod_revision() == 3);
  CHECK(all->events[3].prev_kv().value() == "1");

  // A limit of 2 events still returns the whole of revision 3.
  auto some = s->ReadEvents(Revision(2), 2, false);
  REQUIRE(some.ok());
  CHECK(some->events.size() == 4);
  CHECK(some->next == Revision(4));
  CHECK_FALSE(some->events[3].has_prev_kv());
  auto rest = s->ReadEvents(some->next, 2, false);
  REQUIRE(rest.ok());
  REQUIRE(rest->events.size() == 1);
  CHECK(rest->events[0].kv().key() == "d");
  auto none = s->ReadEvents(Revision(5), 2, false);
  REQUIRE(none.ok());
  CHECK(none->events.empty());
  CHECK(none->next == Revision(5));
}

TEST_CASE("watch resume at the compact revision still sees that revision's deletes",
          "[server][compact][events]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");  // 2
  s.Put("b", "1");  // 3
  s.Delete("a");    // 4
  REQUIRE(s.Compact(4).status.ok());
  auto below = s->ReadEvents(Revision(3), 10, false);
  REQUIRE_FALSE(below.ok());
  CHECK(below.status().message() == epoch::etcd_errors::kCompacted.message);
  auto at = s->ReadEvents(Revision(4), 10, false);
  REQUIRE(at.ok());
  REQUIRE(at->events.size() == 1);
  CHECK(at->events[0].type() == mvccpb::Event::DELETE);
  CHECK(at->events[0].kv().key() == "a");
}

}  // namespace
}  // namespace epoch::server
