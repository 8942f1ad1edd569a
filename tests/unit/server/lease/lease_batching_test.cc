// KeepAliveBatcher and LeaseInFlight (server/lease/include/epoch/lease/lease_keepalive_batcher.h):
// how keep-alives are grouped into one renewal entry, and the rules that keep a renewal and an
// expiry of the same lease from both being in the log — driven with explicit time points.
#include <catch2/catch.hpp>
#include <vector>

#include "epoch/lease/lease_keepalive_batcher.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;
using TimePoint = KeepAliveBatcher::TimePoint;

const TimePoint kT0 = TimePoint{} + 1000h;

etcdserverpb::ResponseHeader HeaderAt(std::int64_t revision) {
  etcdserverpb::ResponseHeader h;
  h.set_revision(revision);
  return h;
}

TEST_CASE("keep-alive batcher: a batch is due one window after its first keep-alive",
          "[server][lease][batch]") {
  KeepAliveBatcher b(5ms, 100);
  CHECK_FALSE(b.FlushDue(kT0 + 1h));  // empty: never due
  b.Add(
      LeaseId(1), HeaderAt(7), [](const KeepAliveOutcome&) {}, kT0);
  CHECK_FALSE(b.FlushDue(kT0 + 4ms));
  b.Add(
      LeaseId(2), HeaderAt(7), [](const KeepAliveOutcome&) {}, kT0 + 4ms);
  // The window runs from the first arrival, not the last.
  CHECK(b.FlushDue(kT0 + 5ms));
  KeepAliveBatcher::Batch batch = b.Take();
  CHECK(batch.ids == std::vector<LeaseId>{LeaseId(1), LeaseId(2)});
  CHECK(b.empty());
  CHECK_FALSE(b.FlushDue(kT0 + 1h));
  // A new batch gets a new window.
  b.Add(
      LeaseId(3), HeaderAt(8), [](const KeepAliveOutcome&) {}, kT0 + 10ms);
  CHECK_FALSE(b.FlushDue(kT0 + 14ms));
  CHECK(b.FlushDue(kT0 + 15ms));
}

TEST_CASE("keep-alive batcher: one lease sent many times is renewed once, every sender answered",
          "[server][lease][batch]") {
  KeepAliveBatcher b(5ms, 100);
  std::vector<int> answered;
  for (int i = 0; i < 5; ++i) {
    b.Add(
        LeaseId(i % 2 == 0 ? 10 : 20), HeaderAt(100 + i),
        [&answered, i](const KeepAliveOutcome&) { answered.push_back(i); }, kT0);
  }
  CHECK(b.distinct() == 2);
  KeepAliveBatcher::Batch batch = b.Take();
  CHECK(batch.ids == std::vector<LeaseId>{LeaseId(10), LeaseId(20)});
  REQUIRE(batch.waiters.size() == 5);
  for (std::size_t i = 0; i < batch.waiters.size(); ++i) {
    // Each waiter keeps its own header (captured when it arrived) and lease.
    CHECK(batch.waiters[i].header.revision() == static_cast<std::int64_t>(100 + i));
    CHECK(batch.waiters[i].id == LeaseId(i % 2 == 0 ? 10 : 20));
    batch.waiters[i].done({});
  }
  CHECK(answered == std::vector<int>{0, 1, 2, 3, 4});
}

TEST_CASE("keep-alive batcher: a full batch is due at once", "[server][lease][batch]") {
  KeepAliveBatcher b(1h, 3);
  b.Add(
      LeaseId(1), {}, [](const KeepAliveOutcome&) {}, kT0);
  b.Add(
      LeaseId(1), {}, [](const KeepAliveOutcome&) {}, kT0);
  b.Add(
      LeaseId(2), {}, [](const KeepAliveOutcome&) {}, kT0);
  CHECK_FALSE(b.FlushDue(kT0));  // two distinct leases: not full
  b.Add(
      LeaseId(3), {}, [](const KeepAliveOutcome&) {}, kT0);
  CHECK(b.FlushDue(kT0));
}

TEST_CASE("lease in flight: unknown, expired and live leases", "[server][lease][batch]") {
  LeaseInFlight f;
  CHECK(f.Decide(LeaseId(1), std::nullopt, 1000) == RenewDecision::kUnknown);
  CHECK(f.Decide(LeaseId(1), 1001, 1000) == RenewDecision::kRenew);
  // At the deadline the lease is over (KvStore::ExpiredLeases uses <= too).
  CHECK(f.Decide(LeaseId(1), 1000, 1000) == RenewDecision::kExpired);
  CHECK(f.Decide(LeaseId(1), 500, 1000) == RenewDecision::kExpired);
}

TEST_CASE("lease in flight: a lease being revoked is never renewed", "[server][lease][batch]") {
  LeaseInFlight f;
  std::vector<LeaseId> revoke = f.SelectExpiries({LeaseId(5)});
  REQUIRE(revoke == std::vector<LeaseId>{LeaseId(5)});
  // The applied state still shows a deadline in the future (the revoke has not applied, or a
  // renewal applied after the expiry check read the state): still not renewable.
  CHECK(f.Decide(LeaseId(5), 99'999, 1000) == RenewDecision::kExpired);
  // Not proposed twice while in flight.
  CHECK(f.SelectExpiries({LeaseId(5)}).empty());
  f.ExpiryDone(LeaseId(5));
  CHECK(f.Decide(LeaseId(5), 99'999, 1000) == RenewDecision::kRenew);
}

TEST_CASE("lease in flight: a lease being renewed is not revoked until the renewal applied",
          "[server][lease][batch]") {
  LeaseInFlight f;
  f.RenewalProposed(LeaseId(7));
  f.RenewalProposed(LeaseId(7));  // two batches in flight
  CHECK(f.SelectExpiries({LeaseId(7), LeaseId(8)}) == std::vector<LeaseId>{LeaseId(8)});
  f.RenewalDone(LeaseId(7));
  CHECK(f.SelectExpiries({LeaseId(7)}).empty());  // one renewal still in flight
  f.RenewalDone(LeaseId(7));
  // Renewals applied; if the applied deadline still passed, expiry may now revoke it.
  CHECK(f.SelectExpiries({LeaseId(7)}) == std::vector<LeaseId>{LeaseId(7)});
  CHECK(f.renewals_in_flight() == 0);
  CHECK(f.expiries_in_flight() == 2);
}

TEST_CASE("lease in flight: a new term forgets what an old term had in flight",
          "[server][lease][batch]") {
  LeaseInFlight f;
  f.RenewalProposed(LeaseId(1));
  (void)f.SelectExpiries({LeaseId(2)});
  f.Reset();
  CHECK(f.renewals_in_flight() == 0);
  CHECK(f.expiries_in_flight() == 0);
  CHECK(f.SelectExpiries({LeaseId(1), LeaseId(2)}) == std::vector<LeaseId>{LeaseId(1), LeaseId(2)});
  // A late answer for a renewal from before the reset changes nothing.
  f.RenewalDone(LeaseId(1));
  CHECK(f.renewals_in_flight() == 0);
}

}  // namespace
}  // namespace epoch::server
