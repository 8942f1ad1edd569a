// Txn semantics (docs/etcd-compatibility.md §3.1, §3.2, §3.9).
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)
using C = etcdserverpb::Compare;

C CmpInt(const std::string& key, C::CompareTarget target, C::CompareResult result, std::int64_t v) {
  C c = Cmp(key, target, result);
  switch (target) {
    case C::VERSION: c.set_version(v); break;
    case C::CREATE: c.set_create_revision(v); break;
    case C::MOD: c.set_mod_revision(v); break;
    case C::LEASE: c.set_lease(v); break;
    default: break;
  }
  return c;
}

C CmpValue(const std::string& key, C::CompareResult result, const std::string& v) {
  C c = Cmp(key, C::VALUE, result);
  c.set_value(v);
  return c;
}

// Whether a txn with the single compare `c` takes the success branch.
bool Holds(TestStore& s, const C& c) {
  etcdserverpb::TxnRequest t;
  *t.add_compare() = c;
  ApplyResult r = s.Txn(t);
  REQUIRE(r.status.ok());
  return r.response.txn().succeeded();
}

TEST_CASE("every compare target and result on an existing key", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.GrantLease(5, 60'000).status.ok());
  s.Put("k", "m", 5);  // rev 2
  s.Put("k", "n", 5);  // rev 3: create 2, mod 3, version 2
  CHECK(Holds(s, CmpInt("k", C::VERSION, C::EQUAL, 2)));
  CHECK(Holds(s, CmpInt("k", C::VERSION, C::GREATER, 1)));
  CHECK_FALSE(Holds(s, CmpInt("k", C::VERSION, C::LESS, 2)));
  CHECK(Holds(s, CmpInt("k", C::VERSION, C::NOT_EQUAL, 3)));
  CHECK(Holds(s, CmpInt("k", C::CREATE, C::EQUAL, 2)));
  CHECK(Holds(s, CmpInt("k", C::CREATE, C::LESS, 3)));
  CHECK(Holds(s, CmpInt("k", C::MOD, C::EQUAL, 3)));
  CHECK_FALSE(Holds(s, CmpInt("k", C::MOD, C::GREATER, 3)));
  CHECK(Holds(s, CmpInt("k", C::LEASE, C::EQUAL, 5)));
  CHECK(Holds(s, CmpInt("k", C::LEASE, C::NOT_EQUAL, 0)));
  CHECK(Holds(s, CmpValue("k", C::EQUAL, "n")));
  CHECK(Holds(s, CmpValue("k", C::GREATER, "m")));
  CHECK(Holds(s, CmpValue("k", C::LESS, "o")));
  CHECK(Holds(s, CmpValue("k", C::NOT_EQUAL, "x")));
  CHECK_FALSE(Holds(s, CmpValue("k", C::EQUAL, "m")));
  // A target_union member other than the target's counts as 0: MOD vs version field.
  C mismatched = Cmp("k", C::MOD, C::GREATER);
  mismatched.set_version(100);
  CHECK(Holds(s, mismatched));
  // Read-only txns do not change the revision.
  CHECK(s->CurrentRevision() == Revision(3));
}

TEST_CASE("compares on an absent key: numeric targets see 0, VALUE always fails", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(Holds(s, CmpInt("nope", C::CREATE, C::EQUAL, 0)));
  CHECK(Holds(s, CmpInt("nope", C::MOD, C::EQUAL, 0)));
  CHECK(Holds(s, CmpInt("nope", C::VERSION, C::EQUAL, 0)));
  CHECK(Holds(s, CmpInt("nope", C::LEASE, C::EQUAL, 0)));
  CHECK(Holds(s, CmpInt("nope", C::VERSION, C::LESS, 1)));
  CHECK_FALSE(Holds(s, CmpValue("nope", C::EQUAL, "")));
  CHECK_FALSE(Holds(s, CmpValue("nope", C::NOT_EQUAL, "x")));
}

TEST_CASE("a compare with range_end must hold for every key in the range", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("p/a", "1");
  s.Put("p/b", "1");
  s.Put("q", "2");
  C all_one = CmpValue("p/", C::EQUAL, "1");
  all_one.set_range_end("p0");
  CHECK(Holds(s, all_one));
  s.Put("p/c", "3");
  CHECK_FALSE(Holds(s, all_one));
  C created_before = CmpInt("p/", C::CREATE, C::LESS, 10);
  created_before.set_range_end("p0");
  CHECK(Holds(s, created_before));
  // An empty range behaves like an absent key.
  C empty = CmpInt("x/", C::VERSION, C::EQUAL, 0);
  empty.set_range_end("x0");
  CHECK(Holds(s, empty));
}

TEST_CASE("all writes of a txn share one revision; events in sub-revision order", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("old", "x");  // rev 2
  etcdserverpb::TxnRequest t;
  *t.add_success()->mutable_request_put() = PutReq("a", "1");
  *t.add_success()->mutable_request_put() = PutReq("b", "2");
  t.add_success()->mutable_request_delete_range()->set_key("old");
  t.add_success()->mutable_request_range()->set_key("a");
  ApplyResult r = s.Txn(t);
  REQUIRE(r.status.ok());
  const auto& txn = r.response.txn();
  CHECK(txn.succeeded());
  CHECK(txn.header().revision() == 3);
  CHECK(r.revision == Revision(3));
  REQUIRE(txn.responses_size() == 4);
  CHECK(txn.responses(0).response_put().header().revision() == 3);
  CHECK(txn.responses(2).response_delete_range().deleted() == 1);
  // The range inside the txn sees the txn's own earlier writes, at the new revision.
  const auto& in_txn = txn.responses(3).response_range();
  REQUIRE(in_txn.kvs_size() == 1);
  CHECK(in_txn.kvs(0).mod_revision() == 3);
  CHECK(in_txn.header().revision() == 3);
  REQUIRE(r.events.size() == 3);
  CHECK(r.events[0].kv().key() == "a");
  CHECK(r.events[1].kv().key() == "b");
  CHECK(r.events[2].type() == mvccpb::Event::DELETE);
  CHECK(s.Get("a").kvs(0).create_revision() == s.Get("b").kvs(0).create_revision());
  // The history sees the three writes at revision 3 in that order.
  auto events = s->ReadEvents(Revision(3), 100, false);
  REQUIRE(events.ok());
  REQUIRE(events->events.size() == 3);
  CHECK(events->events[2].kv().key() == "old");
}

TEST_CASE("a txn that changes nothing keeps the revision", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");
  etcdserverpb::TxnRequest t;
  t.add_success()->mutable_request_delete_range()->set_key("missing");
  t.add_success()->mutable_request_range()->set_key("a");
  ApplyResult r = s.Txn(t);
  REQUIRE(r.status.ok());
  CHECK(r.revision == Revision(2));
  CHECK(r.response.txn().header().revision() == 2);
  CHECK(r.response.txn().responses(0).response_delete_range().header().revision() == 2);
}

TEST_CASE("the failure branch runs when a compare fails", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  etcdserverpb::TxnRequest t;
  *t.add_compare() = CmpValue("k", C::EQUAL, "v");
  *t.add_success()->mutable_request_put() = PutReq("then", "1");
  *t.add_failure()->mutable_request_put() = PutReq("else", "1");
  ApplyResult r = s.Txn(t);
  CHECK_FALSE(r.response.txn().succeeded());
  CHECK(s.Get("else").kvs_size() == 1);
  CHECK(s.Get("then").kvs_size() == 0);
}

TEST_CASE("nested txns: compares see the state before the outer txn", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  // Outer: put k=1, then a nested txn comparing k's version == 0. etcd evaluates all compares on
  // the pre-txn state, so the nested compare holds even though the outer put ran before it.
  etcdserverpb::TxnRequest t;
  *t.add_success()->mutable_request_put() = PutReq("k", "1");
  auto* nested = t.add_success()->mutable_request_txn();
  *nested->add_compare() = CmpInt("k", C::VERSION, C::EQUAL, 0);
  *nested->add_success()->mutable_request_put() = PutReq("nested-then", "x");
  nested->add_success()->mutable_request_range()->set_key("k");
  *nested->add_failure()->mutable_request_put() = PutReq("nested-else", "x");
  ApplyResult r = s.Txn(t);
  REQUIRE(r.status.ok());
  const auto& resp = r.response.txn();
  REQUIRE(resp.responses_size() == 2);
  const auto& inner = resp.responses(1).response_txn();
  CHECK(inner.succeeded());
  CHECK(inner.header().revision() == 0);  // etcd leaves nested txn headers empty
  CHECK(inner.responses(1).response_range().kvs(0).value() == "1");
  CHECK(s.Get("nested-then").kvs_size() == 1);
  CHECK(s.Get("nested-else").kvs_size() == 0);
  CHECK(s->CurrentRevision() == Revision(2));
  CHECK(s.Get("nested-then").kvs(0).mod_revision() == 2);
}

TEST_CASE("txn checks fail the whole txn before any write", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");  // rev 2
  etcdserverpb::TxnRequest lease;
  *lease.add_success()->mutable_request_put() = PutReq("b", "1");
  *lease.add_success()->mutable_request_put() = PutReq("c", "1", /*lease=*/42);
  CHECK(s.Txn(lease).status.message() == epoch::etcd_errors::kLeaseNotFound.message);

  etcdserverpb::TxnRequest ignore;
  *ignore.add_success()->mutable_request_put() = PutReq("b", "1");
  auto missing = PutReq("zz", "");
  missing.set_ignore_value(true);
  *ignore.add_success()->mutable_request_put() = missing;
  CHECK(s.Txn(ignore).status.message() == epoch::etcd_errors::kKeyNotFound.message);

  etcdserverpb::TxnRequest future;
  *future.add_success()->mutable_request_put() = PutReq("b", "1");
  future.add_success()->mutable_request_range()->set_key("a");
  future.mutable_success(1)->mutable_request_range()->set_revision(3);
  CHECK(s.Txn(future).status.message() == std::string(epoch::etcd_errors::kFutureRev.message));

  etcdserverpb::TxnRequest dup;
  *dup.add_success()->mutable_request_put() = PutReq("b", "1");
  *dup.add_success()->mutable_request_put() = PutReq("b", "2");
  CHECK(s.Txn(dup).status.message() == epoch::etcd_errors::kDuplicateKey.message);

  // The failure branch's checks do not matter when the success branch runs.
  etcdserverpb::TxnRequest other_branch;
  *other_branch.add_success()->mutable_request_put() = PutReq("b", "1");
  *other_branch.add_failure()->mutable_request_put() = PutReq("c", "1", /*lease=*/42);
  CHECK(s.Txn(other_branch).status.ok());

  CHECK(s->CurrentRevision() == Revision(3));
  CHECK(s.Get("c").kvs_size() == 0);
}

TEST_CASE("too many ops per txn", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  etcdserverpb::TxnRequest t;
  for (int i = 0; i < 129; ++i)
    *t.add_success()->mutable_request_put() = PutReq("k" + std::to_string(i), "v");
  CHECK(s.Txn(t).status.message() == epoch::etcd_errors::kTooManyOps.message);
  t.mutable_success()->RemoveLast();
  CHECK(s.Txn(t).status.ok());
  CHECK(s.Range(RangeReq("k", "l")).count() == 128);
}

TEST_CASE("ReadOnlyTxn evaluates on the applied state and refuses writes", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  s.Put("a", "1");
  etcdserverpb::TxnRequest t;
  *t.add_compare() = CmpValue("a", C::EQUAL, "1");
  t.add_success()->mutable_request_range()->set_key("a");
  auto r = s->ReadOnlyTxn(t);
  REQUIRE(r.ok());
  CHECK(r->succeeded());
  CHECK(r->header().revision() == 2);
  CHECK(r->responses(0).response_range().kvs(0).value() == "1");
  *t.add_failure()->mutable_request_put() = PutReq("b", "1");
  CHECK_FALSE(s->ReadOnlyTxn(t).ok());
}

TEST_CASE("clientv3 Mutex recipe: create-if-absent, owner by create revision", "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.GrantLease(0x10, 60'000).status.ok());
  REQUIRE(s.GrantLease(0x20, 60'000).status.ok());
  auto lock_txn = [&](const std::string& my_key, std::int64_t lease) {
    etcdserverpb::TxnRequest t;
    *t.add_compare() = CmpInt(my_key, C::CREATE, C::EQUAL, 0);
    *t.add_success()->mutable_request_put() = PutReq(my_key, "", lease);
    auto* owner = t.add_success()->mutable_request_range();
    owner->set_key("lock/");
    owner->set_range_end("lock0");
    owner->set_sort_target(etcdserverpb::RangeRequest::CREATE);
    owner->set_sort_order(etcdserverpb::RangeRequest::ASCEND);
    owner->set_limit(1);
    t.add_failure()->mutable_request_range()->set_key(my_key);
    return s.Txn(t);
  };
  ApplyResult first = lock_txn("lock/10", 0x10);
  REQUIRE(first.response.txn().succeeded());
  const std::int64_t my_rev = first.response.txn().header().revision();
  CHECK(first.response.txn().responses(1).response_range().kvs(0).create_revision() == my_rev);

  ApplyResult second = lock_txn("lock/20", 0x20);
  REQUIRE(second.response.txn().succeeded());
  const auto& owner = second.response.txn().responses(1).response_range().kvs(0);
  CHECK(owner.key() == "lock/10");                            // the first holder still owns it
  CHECK(second.response.txn().header().revision() > my_rev);  // fencing tokens increase

  // Re-entrant attempt with the same lease takes the failure branch and finds its own key.
  ApplyResult again = lock_txn("lock/10", 0x10);
  CHECK_FALSE(again.response.txn().succeeded());
  CHECK(again.response.txn().responses(0).response_range().kvs(0).create_revision() == my_rev);
}

}  // namespace
}  // namespace epoch::server
