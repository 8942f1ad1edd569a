// Leases in the state machine: grant, attach, revoke in one revision, renewals on the cluster
// clock; and the idempotency table.
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

TEST_CASE("lease grant records the deadline on the cluster clock", "[server][lease]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  ApplyResult g = s.GrantLease(7, 5000);
  REQUIRE(g.status.ok());
  CHECK(g.response.lease_grant().id() == 7);
  CHECK(g.response.lease_grant().deadline_cluster_ms() == 6000);
  CHECK(g.response.lease_grant().header().revision() == 1);
  CHECK(g.revision == Revision(1));  // leases do not bump the revision
  auto info = s->GetLease(LeaseId(7));
  REQUIRE(info.ok());
  REQUIRE(info->has_value());
  CHECK((*info)->ttl_ms == 5000);

  CHECK(s.GrantLease(7, 5000).status.message() == epoch::etcd_errors::kLeaseExist.message);
  CHECK(s.GrantLease(8, 9'000'000'000'001).status.message() ==
        epoch::etcd_errors::kLeaseTtlTooLarge.message);
  CHECK_FALSE(s.GrantLease(0, 5000).status.ok());
  CHECK_FALSE(s.GrantLease(9, 0).status.ok());
}

TEST_CASE("revoke deletes every attached key in one revision", "[server][lease]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.GrantLease(1, 10'000).status.ok());
  REQUIRE(s.GrantLease(2, 10'000).status.ok());
  s.Put("k3", "x", 1);     // 2
  s.Put("k1", "x", 1);     // 3
  s.Put("other", "x", 2);  // 4
  s.Put("k2", "x", 1);     // 5
  s.Put("k2", "y", 0);     // 6: detached again
  auto keys = s->LeaseKeys(LeaseId(1));
  REQUIRE(keys.ok());
  CHECK(*keys == std::vector<std::string>{"k1", "k3"});

  ApplyResult r = s.RevokeLease(1);
  REQUIRE(r.status.ok());
  CHECK(r.revision == Revision(7));
  CHECK(r.response.lease_revoke().header().revision() == 7);
  REQUIRE(r.events.size() == 2);
  CHECK(r.events[0].kv().key() == "k1");  // sorted, as etcd's lessor does
  CHECK(r.events[1].kv().key() == "k3");
  CHECK(r.events[0].type() == mvccpb::Event::DELETE);
  CHECK(r.events[1].kv().mod_revision() == 7);
  CHECK(s.Get("k1").kvs_size() == 0);
  CHECK(s.Get("k2").kvs_size() == 1);
  CHECK(s.Get("other").kvs_size() == 1);
  auto gone = s->GetLease(LeaseId(1));
  REQUIRE(gone.ok());
  CHECK_FALSE(gone->has_value());
  CHECK(s.RevokeLease(1).status.message() == epoch::etcd_errors::kLeaseNotFound.message);
  // Putting with the revoked lease now fails.
  CHECK(s.Put("k1", "x", 1).status.message() == epoch::etcd_errors::kLeaseNotFound.message);
}

TEST_CASE("revoking a lease without keys keeps the revision", "[server][lease]") {
  TempDir dir;
  TestStore s(dir.path());
  REQUIRE(s.GrantLease(1, 10'000).status.ok());
  ApplyResult r = s.RevokeLease(1);
  REQUIRE(r.status.ok());
  CHECK(r.revision == Revision(1));
  CHECK(r.events.empty());
}

TEST_CASE("renewals extend deadlines from the cluster clock, which never runs backwards",
          "[server][lease]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  REQUIRE(s.GrantLease(1, 3000).status.ok());
  REQUIRE(s.GrantLease(2, 9000).status.ok());
  auto expired = s->ExpiredLeases(4000, 10);
  REQUIRE(expired.ok());
  CHECK(*expired == std::vector<LeaseId>{LeaseId(1)});

  s.set_clock_ms(3500);
  v1::InternalRequest renew;
  renew.mutable_lease_checkpoint()->add_ids(1);
  renew.mutable_lease_checkpoint()->add_ids(99);
  ApplyResult r = s.Apply(renew);
  REQUIRE(r.status.ok());
  const auto& results = r.response.lease_checkpoint().results();
  REQUIRE(results.size() == 2);
  CHECK(results[0].deadline_cluster_ms() == 6500);
  CHECK(results[0].ttl_ms() == 3000);
  CHECK(results[1].ttl_ms() == 0);  // unknown lease
  expired = s->ExpiredLeases(6000, 10);
  REQUIRE(expired.ok());
  CHECK(expired->empty());

  // A stale leader stamps an older time: the clock stays at 3500.
  s.set_clock_ms(2000);
  v1::InternalRequest tick;
  tick.mutable_clock_tick();
  ApplyResult t = s.Apply(tick);
  CHECK(t.response.clock_tick().cluster_time_ms() == 3500);
  CHECK(s->ClusterTimeMs() == 3500);
}

TEST_CASE("an idempotency key makes a retried write apply once", "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  v1::InternalRequest req;
  req.set_idempotency_key("job-1/stage-2");
  req.set_idempotency_ttl_ms(5000);
  *req.mutable_put() = PutReq("k", "v");
  ApplyResult first = s.Apply(req);
  REQUIRE(first.status.ok());
  CHECK_FALSE(first.response.replayed());
  CHECK(first.revision == Revision(2));

  ApplyResult retry = s.Apply(req);
  REQUIRE(retry.status.ok());
  CHECK(retry.response.replayed());
  CHECK(retry.response.put().header().revision() == 2);  // the original answer
  CHECK(s->CurrentRevision() == Revision(2));
  CHECK(retry.events.empty());
  CHECK(s.Get("k").kvs(0).version() == 1);

  // After the TTL the key is forgotten and the write applies again.
  s.set_clock_ms(6001);
  ApplyResult later = s.Apply(req);
  CHECK_FALSE(later.response.replayed());
  CHECK(s.Get("k").kvs(0).version() == 2);
}

TEST_CASE("a failed keyed request is remembered with its error", "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  v1::InternalRequest req;
  req.set_idempotency_key("once");
  *req.mutable_put() = PutReq("k", "v", /*lease=*/5);
  CHECK(s.Apply(req).status.message() == epoch::etcd_errors::kLeaseNotFound.message);
  REQUIRE(s.GrantLease(5, 10'000).status.ok());
  // Same key again: the remembered error, not a new attempt.
  CHECK(s.Apply(req).status.message() == epoch::etcd_errors::kLeaseNotFound.message);
  CHECK(s.Get("k").kvs_size() == 0);
}

TEST_CASE("expired idempotency records are pruned as entries apply", "[server][idempotency]") {
  TempDir dir;
  KvStoreOptions o;
  o.idempotency_prune_per_apply = 2;
  TestStore s(dir.path(), o);
  s.set_clock_ms(100);
  for (int i = 0; i < 5; ++i) {
    v1::InternalRequest req;
    req.set_idempotency_key("k" + std::to_string(i));
    req.set_idempotency_ttl_ms(10);
    req.mutable_clock_tick();
    REQUIRE(s.Apply(req).status.ok());
  }
  auto hash_full = s->StateHash();
  s.set_clock_ms(1000);
  v1::InternalRequest tick;
  tick.mutable_clock_tick();
  for (int i = 0; i < 3; ++i) s.Apply(tick);  // prunes 2 per apply: all 5 gone after 3
  auto hash_pruned = s->StateHash();
  // A fresh store that only saw the ticks at time 1000 has the same state, except the revision
  // counters, which both left at 1: so the hashes must be equal if nothing is left over.
  TempDir dir2;
  TestStore fresh(dir2.path(), o);
  fresh.set_clock_ms(1000);
  fresh.Apply(tick);
  REQUIRE(hash_pruned.ok());
  REQUIRE(hash_full.ok());
  CHECK(*hash_pruned != *hash_full);
  CHECK(*hash_pruned == *fresh->StateHash());
}

TEST_CASE("the in-memory expiry hint prunes exactly what a full scan prunes",
          "[server][idempotency]") {
  // One store keeps its hint across applies; the other is reopened before every apply, so it
  // starts each time without a hint and must scan. Same entries, same clock: the state hashes
  // must agree after every step, including records remembered after a prune and records that
  // expire later than others.
  KvStoreOptions o;
  o.idempotency_prune_per_apply = 2;
  TempDir dir_a;
  TempDir dir_b;
  TestStore a(dir_a.path(), o);
  TestStore b(dir_b.path(), o);
  const std::int64_t ttls[] = {10, 500, 30, 10, 2000, 40, 10};
  for (int step = 0; step < 60; ++step) {
    const std::int64_t now = 100 + step * 25;
    a.set_clock_ms(now);
    b.set_clock_ms(now);
    v1::InternalRequest req;
    req.mutable_clock_tick();
    if (step % 3 != 2) {  // every third entry carries no key: only pruning happens
      req.set_idempotency_key("k" + std::to_string(step % 9));
      req.set_idempotency_ttl_ms(ttls[step % 7]);
    }
    b.Reopen();
    REQUIRE(a.Apply(req).status.ok());
    REQUIRE(b.Apply(req).status.ok());
    auto ha = a->StateHash();
    auto hb = b->StateHash();
    REQUIRE(ha.ok());
    REQUIRE(hb.ok());
    INFO("step " << step);
    REQUIRE(*ha == *hb);
  }
}

}  // namespace
}  // namespace epoch::server
