// The idempotency table's session keys (client id + sequence): applied once, replayed within the
// window, refused after it (the client's watermark), bounded by the entry's records / bytes
// limits, and owned by the user that wrote them.
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "idempotency.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

v1::InternalRequest SessionPut(const std::string& client, std::uint64_t seq, const std::string& key,
                               std::int64_t ttl_ms = 1000) {
  v1::InternalRequest req;
  req.set_idempotency_client_id(client);
  req.set_idempotency_sequence(seq);
  req.set_idempotency_ttl_ms(ttl_ms);
  *req.mutable_put() = PutReq(key, "v" + std::to_string(seq));
  return req;
}

v1::InternalRequest Tick() {
  v1::InternalRequest req;
  req.mutable_clock_tick();
  return req;
}

TEST_CASE("a session key applies once, replays in its window and is refused after it",
          "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  ApplyResult first = s.Apply(SessionPut("c1", 1, "a"));
  REQUIRE(first.status.ok());
  CHECK_FALSE(first.response.replayed());
  ApplyResult again = s.Apply(SessionPut("c1", 1, "a"));
  REQUIRE(again.status.ok());
  CHECK(again.response.replayed());
  CHECK(again.response.put().header().revision() == first.response.put().header().revision());
  CHECK(s.Get("a").kvs(0).version() == 1);

  // Past the window the record is pruned and the client's watermark remembers sequence 1.
  s.set_clock_ms(2001);
  ApplyResult late = s.Apply(SessionPut("c1", 1, "a"));
  CHECK(late.status.Is(ErrorId::kIdempotencyExpired));
  CHECK(late.status.message() == etcd_errors::kIdempotencyExpired.message);
  CHECK(s.Get("a").kvs(0).version() == 1);
  // The same client goes on with higher sequences; another client is unaffected.
  CHECK(s.Apply(SessionPut("c1", 2, "a")).status.ok());
  CHECK(s.Apply(SessionPut("c2", 1, "a")).status.ok());
  CHECK(s.Get("a").kvs(0).version() == 3);
}

TEST_CASE("an expired session record not pruned yet is refused too", "[server][idempotency]") {
  TempDir dir;
  KvStoreOptions o;
  o.idempotency_prune_per_apply = 0;  // nothing is pruned: the record outlives its window
  TestStore s(dir.path(), o);
  s.set_clock_ms(1000);
  REQUIRE(s.Apply(SessionPut("c1", 7, "a")).status.ok());
  s.set_clock_ms(5000);
  CHECK(s.Apply(SessionPut("c1", 7, "a")).status.Is(ErrorId::kIdempotencyExpired));
  CHECK(s.Get("a").kvs(0).version() == 1);
}

TEST_CASE("a sequence below the watermark is refused even if it never applied",
          "[server][idempotency]") {
  // The watermark cannot tell a late first attempt from a late retry: both are refused, so
  // nothing is ever applied twice.
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  REQUIRE(s.Apply(SessionPut("c1", 5, "a")).status.ok());
  s.set_clock_ms(3000);
  s.Apply(Tick());
  CHECK(s.Apply(SessionPut("c1", 4, "b")).status.Is(ErrorId::kIdempotencyExpired));
  CHECK(s.Get("b").kvs_size() == 0);
  CHECK(s.Apply(SessionPut("c1", 6, "b")).status.ok());
}

TEST_CASE("the watermark is stored: it survives a reopen and expires much later",
          "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  REQUIRE(s.Apply(SessionPut("c1", 1, "a")).status.ok());
  s.set_clock_ms(2500);
  s.Apply(Tick());  // prunes the record, raises the watermark
  s.Reopen();
  CHECK(s.Apply(SessionPut("c1", 1, "a")).status.Is(ErrorId::kIdempotencyExpired));

  // kWatermarkRetentionMs (7 days) after the record expired the watermark goes, and with it
  // the last record: the table is empty and leaves no trace in the state.
  s.set_clock_ms(2000 + 7LL * 24 * 3600 * 1000 + 1);
  s.Apply(Tick());
  Result<std::uint64_t> hash = s->StateHash();
  TempDir dir2;
  TestStore fresh(dir2.path());
  fresh.set_clock_ms(1);
  fresh.Put("a", "v1");
  fresh.set_clock_ms(2000 + 7LL * 24 * 3600 * 1000 + 1);
  fresh.Apply(Tick());
  REQUIRE(hash.ok());
  CHECK(*hash == *fresh->StateHash());
}

TEST_CASE("the table's records bound refuses new keys, not replays", "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  auto bounded = [](v1::InternalRequest r) {
    r.set_idempotency_records_max(2);
    return r;
  };
  REQUIRE(s.Apply(bounded(SessionPut("c1", 1, "a"))).status.ok());
  REQUIRE(s.Apply(bounded(SessionPut("c1", 2, "a"))).status.ok());
  ApplyResult full = s.Apply(bounded(SessionPut("c1", 3, "a")));
  CHECK(full.status.Is(ErrorId::kIdempotencyTableFull));
  CHECK(s.Get("a").kvs(0).version() == 2);
  CHECK(s.Apply(bounded(SessionPut("c1", 2, "a"))).response.replayed());
  // Refused, not remembered: once room is made the same key applies.
  s.set_clock_ms(2001);  // both records expire; one watermark record replaces them
  s.Apply(Tick());
  ApplyResult later = s.Apply(bounded(SessionPut("c1", 3, "a")));
  CHECK(later.status.ok());
  CHECK_FALSE(later.response.replayed());
}

TEST_CASE("the table's bytes bound refuses new keys", "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  v1::InternalRequest big = SessionPut("c1", 1, "a");
  big.set_idempotency_bytes_max(8);
  REQUIRE(s.Apply(big).status.ok());  // the table was empty
  v1::InternalRequest next = SessionPut("c1", 2, "b");
  next.set_idempotency_bytes_max(8);
  CHECK(s.Apply(next).status.Is(ErrorId::kIdempotencyTableFull));
  next.set_idempotency_bytes_max(1 << 20);
  CHECK(s.Apply(next).status.ok());
}

TEST_CASE("a remembered answer is replayed only to the user that wrote it",
          "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  s.set_clock_ms(1000);
  v1::InternalRequest req = SessionPut("c1", 1, "a");
  req.set_auth_user("alice");
  REQUIRE(s.Apply(req).status.ok());
  req.set_auth_user("mallory");
  CHECK(s.Apply(req).status.Is(ErrorId::kPermissionDenied));
  req.set_auth_user("alice");
  CHECK(s.Apply(req).response.replayed());
}

TEST_CASE("a malformed session key in an entry is refused", "[server][idempotency]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(s.Apply(SessionPut("c1", 0, "a")).status.Is(StatusCode::kInvalidArgument));
  CHECK(s.Apply(SessionPut(std::string(65, 'c'), 1, "a")).status.Is(StatusCode::kInvalidArgument));
  CHECK(s.Get("a").kvs_size() == 0);
}

TEST_CASE("replicas agree on pruning and watermarks whatever their expiry hint",
          "[server][idempotency]") {
  // As the free-form test in kv_store_lease_test.cc: one store keeps its hint, the other is
  // reopened before every apply; session records of several clients expire and raise
  // watermarks, which expire in turn.
  KvStoreOptions o;
  o.idempotency_prune_per_apply = 2;
  TempDir dir_a;
  TempDir dir_b;
  TestStore a(dir_a.path(), o);
  TestStore b(dir_b.path(), o);
  const std::int64_t ttls[] = {10, 500, 30, 10, 2000, 40, 10};
  for (int step = 0; step < 60; ++step) {
    const std::int64_t now = 100 + step * 25 + (step >= 40 ? kWatermarkRetentionMs : 0);
    a.set_clock_ms(now);
    b.set_clock_ms(now);
    v1::InternalRequest req =
        step % 3 == 2 ? Tick()
                      : SessionPut("c" + std::to_string(step % 4),
                                   static_cast<std::uint64_t>(step + 1), "k", ttls[step % 7]);
    b.Reopen();
    ApplyResult ra = a.Apply(req);
    ApplyResult rb = b.Apply(req);
    INFO("step " << step);
    CHECK(ra.status.ToString() == rb.status.ToString());
    Result<std::uint64_t> ha = a->StateHash();
    Result<std::uint64_t> hb = b->StateHash();
    REQUIRE(ha.ok());
    REQUIRE(hb.ok());
    REQUIRE(*ha == *hb);
  }
}

}  // namespace
}  // namespace epoch::server
