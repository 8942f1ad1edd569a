// Revisions and per-key metadata for Put and DeleteRange (docs/etcd-compatibility.md §3.1).
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

TEST_CASE("an empty store is at revision 1 and the first put gets revision 2", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(s->CurrentRevision() == Revision(1));
  CHECK(s.Get("a").header().revision() == 1);
  CHECK(s.Get("a").kvs_size() == 0);

  ApplyResult r = s.Put("a", "1");
  REQUIRE(r.status.ok());
  CHECK(r.revision == Revision(2));
  CHECK(r.response.put().header().revision() == 2);
  CHECK(s->CurrentRevision() == Revision(2));
}

TEST_CASE("create/mod revision and version per key", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");  // rev 2
  s.Put("b", "1");  // rev 3
  s.Put("a", "2");  // rev 4
  const auto a = s.Get("a").kvs(0);
  CHECK(a.create_revision() == 2);
  CHECK(a.mod_revision() == 4);
  CHECK(a.version() == 2);
  CHECK(a.value() == "2");
  CHECK(a.lease() == 0);

  // Delete, then re-create: the key starts over at version 1 with a new create revision.
  ApplyResult d = s.Delete("a");
  CHECK(d.revision == Revision(5));
  CHECK(d.response.delete_range().deleted() == 1);
  CHECK(d.response.delete_range().header().revision() == 5);
  s.Put("a", "3");  // rev 6
  const auto again = s.Get("a").kvs(0);
  CHECK(again.create_revision() == 6);
  CHECK(again.version() == 1);
}

TEST_CASE("a delete that removes nothing does not bump the revision", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");
  ApplyResult d = s.Delete("zzz");
  REQUIRE(d.status.ok());
  CHECK(d.response.delete_range().deleted() == 0);
  CHECK(d.revision == Revision(2));
  CHECK(d.response.delete_range().header().revision() == 2);
  CHECK(d.events.empty());
}

TEST_CASE("a range delete removes every key at one revision with sub-revision order",
          "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");
  s.Put("b", "2");
  s.Put("c", "3");
  s.Put("d", "4");  // rev 5
  ApplyResult d = s.Delete("b", "d", /*prev_kv=*/true);
  CHECK(d.revision == Revision(6));
  CHECK(d.response.delete_range().deleted() == 2);
  REQUIRE(d.response.delete_range().prev_kvs_size() == 2);
  CHECK(d.response.delete_range().prev_kvs(0).key() == "b");
  CHECK(d.response.delete_range().prev_kvs(1).value() == "3");
  REQUIRE(d.events.size() == 2);
  CHECK(d.events[0].type() == mvccpb::Event::DELETE);
  CHECK(d.events[0].kv().key() == "b");
  CHECK(d.events[0].kv().mod_revision() == 6);
  CHECK(d.events[0].kv().version() == 0);
  CHECK(d.events[0].prev_kv().value() == "2");
  CHECK(Keys(s.Range(RangeReq("a", std::string(1, '\0')))) == std::vector<std::string>{"a", "d"});
}

TEST_CASE("put with prev_kv returns the previous key-value", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  auto p = PutReq("a", "1");
  p.set_prev_kv(true);
  ApplyResult first = s.Put(p);
  CHECK_FALSE(first.response.put().has_prev_kv());
  p.set_value("2");
  ApplyResult second = s.Put(p);
  REQUIRE(second.response.put().has_prev_kv());
  CHECK(second.response.put().prev_kv().value() == "1");
  CHECK(second.response.put().prev_kv().mod_revision() == 2);
  // The event always carries prev_kv; Watch drops it when the watcher did not ask.
  REQUIRE(second.events.size() == 1);
  CHECK(second.events[0].type() == mvccpb::Event::PUT);
  CHECK(second.events[0].kv().version() == 2);
  CHECK(second.events[0].prev_kv().value() == "1");
}

TEST_CASE("ignore_value and ignore_lease keep the current value and lease", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.GrantLease(7, 10'000).status.ok());
  s.Put("a", "v1", 7);

  auto keep_value = PutReq("a", "");
  keep_value.set_ignore_value(true);
  keep_value.set_lease(0);
  ApplyResult r1 = s.Put(keep_value);
  REQUIRE(r1.status.ok());
  auto a = s.Get("a").kvs(0);
  CHECK(a.value() == "v1");
  CHECK(a.lease() == 0);  // a put without lease detaches
  CHECK(a.version() == 2);

  s.Put("a", "v2", 7);
  auto keep_lease = PutReq("a", "v3");
  keep_lease.set_ignore_lease(true);
  REQUIRE(s.Put(keep_lease).status.ok());
  a = s.Get("a").kvs(0);
  CHECK(a.value() == "v3");
  CHECK(a.lease() == 7);

  // On a missing key both fail with etcd's "key not found", and nothing is written.
  const Revision before = s->CurrentRevision();
  auto missing = PutReq("nope", "");
  missing.set_ignore_value(true);
  ApplyResult r2 = s.Put(missing);
  CHECK(r2.status.message() == epoch::etcd_errors::kKeyNotFound.message);
  CHECK(s->CurrentRevision() == before);
  CHECK(r2.events.empty());
}

TEST_CASE("put validation errors use etcd's messages and change nothing", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  auto bad = PutReq("a", "x");
  bad.set_ignore_value(true);
  CHECK(s.Put(bad).status.message() == epoch::etcd_errors::kValueProvided.message);
  CHECK(s.Put(PutReq("", "x")).status.message() == epoch::etcd_errors::kEmptyKey.message);
  CHECK(s.Put("a", "x", /*lease=*/99).status.message() ==
        epoch::etcd_errors::kLeaseNotFound.message);
  CHECK(s->CurrentRevision() == Revision(1));
  CHECK(s.Get("a").kvs_size() == 0);
  // The entries still count as applied (every replica rejected them the same way).
  CHECK(s->AppliedIndex() == LogIndex(3));
}

TEST_CASE("oversized requests are rejected as too large", "[server][put]") {
  TempDir dir;
  KvStoreOptions o;
  o.limits.max_request_bytes = 1024;
  TestStore s(dir.path(), o);
  ApplyResult r = s.Put("big", std::string(2000, 'x'));
  CHECK(r.status.message() == epoch::etcd_errors::kRequestTooLarge.message);
  CHECK(s.Get("big").kvs_size() == 0);
  CHECK(s.Put("small", std::string(100, 'x')).status.ok());
}

TEST_CASE("keys may contain any bytes, including 0x00 and 0xff", "[server][put]") {
  TempDir dir;
  TestStore s(dir.path());
  const std::string k1("a\x00", 2);
  const std::string k2("a\xff", 2);
  s.Put("a", "plain");
  s.Put(k1, "zero");
  s.Put(k2, "ff");
  CHECK(s.Get(k1).kvs(0).value() == "zero");
  CHECK(Keys(s.Range(RangeReq("a", "b"))) == std::vector<std::string>{"a", k1, k2});
  // Historical reads go through the escaped index and must agree.
  auto hist = RangeReq("a", "b");
  hist.set_revision(3);
  CHECK(Keys(s.Range(hist)) == std::vector<std::string>{"a", k1});
}

}  // namespace
}  // namespace epoch::server
