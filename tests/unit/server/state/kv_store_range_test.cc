// Range semantics (docs/etcd-compatibility.md §3.3).
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "range_query.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

const std::string kFromKey(1, '\0');

// a..e written in an order that makes key, create and mod order differ:
// rev 2: c, 3: a, 4: e, 5: b, 6: d, 7: c again (version 2), 8: a again, 9: a again (version 3).
void Populate(TestStore& s) {
  s.Put("c", "3");
  s.Put("a", "1");
  s.Put("e", "5");
  s.Put("b", "2");
  s.Put("d", "4");
  s.Put("c", "33");
  s.Put("a", "11");
  s.Put("a", "111");
}

TEST_CASE("single key, range_end, prefix and from-key", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  s.Put("ab", "x");  // rev 10
  CHECK(Keys(s.Get("a")) == std::vector<std::string>{"a"});
  CHECK(Keys(s.Range(RangeReq("a", "c"))) == std::vector<std::string>{"a", "ab", "b"});
  CHECK(Keys(s.Range(RangeReq("a", "b"))) == std::vector<std::string>{"a", "ab"});  // prefix "a"
  CHECK(Keys(s.Range(RangeReq("c", kFromKey))) == std::vector<std::string>{"c", "d", "e"});
  CHECK(s.Range(RangeReq(kFromKey, kFromKey)).count() == 6);  // etcdctl get --from-key ''
  CHECK(s.Get("zz").kvs_size() == 0);
  // An inverted range matches nothing (etcd returns an empty result, not an error).
  CHECK(s.Range(RangeReq("d", "a")).count() == 0);
  CHECK(s.Range(RangeReq("a", "c")).header().revision() == 10);
}

TEST_CASE("limit, more and count", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  auto r = RangeReq("a", kFromKey);
  r.set_limit(2);
  auto resp = s.Range(r);
  CHECK(Keys(resp) == std::vector<std::string>{"a", "b"});
  CHECK(resp.more());
  CHECK(resp.count() == 5);
  r.set_limit(5);
  resp = s.Range(r);
  CHECK(resp.kvs_size() == 5);
  CHECK_FALSE(resp.more());
  r.set_limit(0);
  CHECK(s.Range(r).kvs_size() == 5);
}

TEST_CASE("historical reads see the state at that revision", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  s.Delete("e");  // rev 10
  auto r = RangeReq("a", kFromKey);
  r.set_revision(4);
  auto resp = s.Range(r);
  CHECK(Keys(resp) == std::vector<std::string>{"a", "c", "e"});
  CHECK(resp.kvs(0).value() == "1");
  CHECK(resp.count() == 3);
  CHECK(resp.header().revision() == 10);  // header is the current revision
  r.set_revision(9);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"a", "b", "c", "d", "e"});
  CHECK(s.Range(r).kvs(0).version() == 3);
  r.set_revision(10);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"a", "b", "c", "d"});
  r.set_revision(1);
  CHECK(s.Range(r).count() == 0);
  r.set_revision(4);
  r.set_limit(1);
  resp = s.Range(r);
  CHECK(Keys(resp) == std::vector<std::string>{"a"});
  CHECK(resp.more());
  CHECK(resp.count() == 3);
}

TEST_CASE("future and compacted revisions fail with etcd's messages", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  auto r = RangeReq("a");
  r.set_revision(10);
  auto future = s->Range(r);
  REQUIRE_FALSE(future.ok());
  CHECK(future.status().message() == epoch::etcd_errors::kFutureRev.message);
  REQUIRE(s.Compact(5).status.ok());
  r.set_revision(4);
  auto compacted = s->Range(r);
  REQUIRE_FALSE(compacted.ok());
  CHECK(compacted.status().message() == epoch::etcd_errors::kCompacted.message);
  r.set_revision(5);  // the compact revision itself is still readable
  CHECK(s.Range(r).kvs(0).value() == "1");
}

TEST_CASE("sort by every target, both orders; NONE with a target means ASCEND", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  auto r = RangeReq("a", kFromKey);
  using RR = etcdserverpb::RangeRequest;
  auto sorted = [&](RR::SortTarget t, RR::SortOrder o) {
    r.set_sort_target(t);
    r.set_sort_order(o);
    return Keys(s.Range(r));
  };
  using V = std::vector<std::string>;
  CHECK(sorted(RR::KEY, RR::NONE) == V{"a", "b", "c", "d", "e"});
  CHECK(sorted(RR::KEY, RR::DESCEND) == V{"e", "d", "c", "b", "a"});
  CHECK(sorted(RR::CREATE, RR::ASCEND) == V{"c", "a", "e", "b", "d"});
  CHECK(sorted(RR::CREATE, RR::NONE) == V{"c", "a", "e", "b", "d"});
  CHECK(sorted(RR::CREATE, RR::DESCEND) == V{"d", "b", "e", "a", "c"});
  CHECK(sorted(RR::MOD, RR::ASCEND) == V{"e", "b", "d", "c", "a"});
  CHECK(sorted(RR::MOD, RR::DESCEND) == V{"a", "c", "d", "b", "e"});
  // Ties keep key order: versions are a=3, c=2, others 1.
  CHECK(sorted(RR::VERSION, RR::ASCEND) == V{"b", "d", "e", "c", "a"});
  CHECK(sorted(RR::VERSION, RR::DESCEND) == V{"a", "c", "b", "d", "e"});
  CHECK(sorted(RR::VALUE, RR::ASCEND) == V{"a", "b", "c", "d", "e"});  // "111" < "2" < "33"...
  CHECK(sorted(RR::VALUE, RR::DESCEND) == V{"e", "d", "c", "b", "a"});
}

TEST_CASE("sort and filters scan everything before limit (lock-queue queries)", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  using RR = etcdserverpb::RangeRequest;
  // clientv3 Mutex: first creator under a prefix = sort CREATE ASCEND limit 1.
  auto first = RangeReq("a", kFromKey);
  first.set_sort_target(RR::CREATE);
  first.set_sort_order(RR::ASCEND);
  first.set_limit(1);
  auto resp = s.Range(first);
  CHECK(Keys(resp) == std::vector<std::string>{"c"});
  CHECK(resp.more());
  CHECK(resp.count() == 5);
  // waitDeletes: the last creator before my revision.
  auto last_before = RangeReq("a", kFromKey);
  last_before.set_sort_target(RR::CREATE);
  last_before.set_sort_order(RR::DESCEND);
  last_before.set_limit(1);
  last_before.set_max_create_revision(4);
  CHECK(Keys(s.Range(last_before)) == std::vector<std::string>{"e"});
  // Limit with NONE order and a non-KEY target sorts the whole range first.
  auto none_order = RangeReq("a", kFromKey);
  none_order.set_sort_target(RR::MOD);
  none_order.set_limit(2);
  CHECK(Keys(s.Range(none_order)) == std::vector<std::string>{"e", "b"});
}

TEST_CASE("min/max mod/create filters; count stays the unfiltered count", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  auto r = RangeReq("a", kFromKey);
  r.set_min_mod_revision(6);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"a", "c", "d"});
  r.set_max_mod_revision(7);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"c", "d"});
  CHECK(s.Range(r).count() == 5);  // etcd's count is taken before the filters
  r = RangeReq("a", kFromKey);
  r.set_min_create_revision(3);
  r.set_max_create_revision(5);
  CHECK(Keys(s.Range(r)) == std::vector<std::string>{"a", "b", "e"});
  r.set_limit(2);
  auto resp = s.Range(r);
  CHECK(Keys(resp) == std::vector<std::string>{"a", "b"});
  CHECK(resp.more());
}

TEST_CASE("keys_only and count_only", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  Populate(s);
  auto r = RangeReq("a", kFromKey);
  r.set_keys_only(true);
  auto resp = s.Range(r);
  REQUIRE(resp.kvs_size() == 5);
  CHECK(resp.kvs(0).value().empty());
  CHECK(resp.kvs(0).mod_revision() == 9);
  r.set_keys_only(false);
  r.set_count_only(true);
  resp = s.Range(r);
  CHECK(resp.kvs_size() == 0);
  CHECK(resp.count() == 5);
  CHECK_FALSE(resp.more());
  r.set_revision(3);
  CHECK(s.Range(r).count() == 2);
}

TEST_CASE("range validation errors", "[server][range]") {
  TempDir dir;
  TestStore s(dir.path());
  auto empty = s->Range(RangeReq(""));
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().message() == epoch::etcd_errors::kEmptyKey.message);
  auto r = RangeReq("a");
  r.set_sort_target(static_cast<etcdserverpb::RangeRequest::SortTarget>(42));
  auto bad_sort = s->Range(r);
  REQUIRE_FALSE(bad_sort.ok());
  CHECK(bad_sort.status().message() == epoch::etcd_errors::kInvalidSortOption.message);
}

TEST_CASE("FilterSortLimit alone: filter, then sort, then limit", "[server][range]") {
  std::vector<mvccpb::KeyValue> kvs(4);
  for (int i = 0; i < 4; ++i) {
    kvs[i].set_key(std::string(1, static_cast<char>('a' + i)));
    kvs[i].set_mod_revision(10 - i);
  }
  etcdserverpb::RangeRequest r;
  r.set_sort_target(etcdserverpb::RangeRequest::MOD);
  r.set_max_mod_revision(9);
  r.set_limit(2);
  bool more = false;
  FilterSortLimit(r, &kvs, &more);
  REQUIRE(kvs.size() == 2);
  CHECK(kvs[0].key() == "d");
  CHECK(kvs[1].key() == "c");
  CHECK(more);
}

}  // namespace
}  // namespace epoch::server
