// ClusterClock (server/lease/include/epoch/lease/cluster_clock.h): the leader's replicated clock,
// driven with explicit time points — when it starts, what it continues from, that stamps never go
// back, the idle tick, the follower estimate, the stall measured at a failover, and the published
// bounds.
#include <catch2/catch.hpp>

#include "epoch/lease/cluster_clock.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;
using TimePoint = ClusterClock::TimePoint;

const TimePoint kT0 = TimePoint{} + 1000h;

TEST_CASE("cluster clock: a new leader does not stamp until its first entry applied",
          "[server][lease][clock]") {
  ClusterClock clock;
  clock.BecomeLeader(Term(3), LogIndex(10));
  CHECK(clock.leading());
  CHECK_FALSE(clock.running());
  // Stamp 0 = "keep the state machine's clock" (it takes the max).
  CHECK(clock.Stamp(kT0) == 0);
  CHECK_FALSE(clock.MaybeStart(LogIndex(9), 5000, kT0));
  CHECK_FALSE(clock.running());
  CHECK(clock.Stamp(kT0 + 5ms) == 0);
  CHECK(clock.MaybeStart(LogIndex(10), 5000, kT0 + 10ms));
  CHECK(clock.running());
  CHECK_FALSE(clock.MaybeStart(LogIndex(11), 9000, kT0 + 11ms));  // starts once only
}

TEST_CASE("cluster clock: continues from the applied cluster time, not from zero or wall time",
          "[server][lease][clock]") {
  ClusterClock clock;
  clock.BecomeLeader(Term(2), LogIndex(4));
  REQUIRE(clock.MaybeStart(LogIndex(4), 123'456, kT0));
  CHECK(clock.Now(kT0) == 123'456);
  CHECK(clock.Now(kT0 + 250ms) == 123'706);
  CHECK(clock.Stamp(kT0 + 1s) == 124'456);
}

TEST_CASE("cluster clock: stamps never decrease", "[server][lease][clock]") {
  ClusterClock clock;
  clock.BecomeLeader(Term(2), LogIndex(1));
  REQUIRE(clock.MaybeStart(LogIndex(1), 1000, kT0));
  std::int64_t a = clock.Stamp(kT0 + 100ms);
  CHECK(a == 1100);
  // A time point earlier than the last one (callers on another thread, a coarse clock).
  std::int64_t b = clock.Stamp(kT0 + 50ms);
  CHECK(b >= a);
  CHECK(clock.Stamp(kT0 + 101ms) == 1101);
}

TEST_CASE("cluster clock: stepping down stops it; the next term starts again from applied time",
          "[server][lease][clock]") {
  ClusterClock clock;
  clock.BecomeLeader(Term(2), LogIndex(1));
  REQUIRE(clock.MaybeStart(LogIndex(1), 1000, kT0));
  clock.StepDown();
  CHECK_FALSE(clock.leading());
  CHECK_FALSE(clock.running());
  CHECK(clock.Stamp(kT0 + 1s) == 0);
  CHECK_FALSE(clock.MaybeStart(LogIndex(50), 1000, kT0 + 1s));  // not leading
  // Leader again two seconds later; the applied clock only reached 1500 meanwhile (the other
  // leader ran for 500 ms): the clock continues at 1500, it does not add our two seconds.
  clock.BecomeLeader(Term(4), LogIndex(60));
  REQUIRE(clock.MaybeStart(LogIndex(60), 1500, kT0 + 2s));
  CHECK(clock.Now(kT0 + 2s) == 1500);
  CHECK(clock.term() == Term(4));
}

TEST_CASE("cluster clock: an idle leader's tick is due one interval after its last stamp",
          "[server][lease][clock]") {
  ClusterClock clock;
  CHECK_FALSE(clock.TickDue(kT0, 100ms));  // not leading
  clock.BecomeLeader(Term(2), LogIndex(1));
  CHECK_FALSE(clock.TickDue(kT0 + 1s, 100ms));  // not running
  REQUIRE(clock.MaybeStart(LogIndex(1), 0, kT0));
  CHECK_FALSE(clock.TickDue(kT0 + 99ms, 100ms));
  CHECK(clock.TickDue(kT0 + 100ms, 100ms));
  (void)clock.Stamp(kT0 + 150ms);  // any proposal counts
  CHECK_FALSE(clock.TickDue(kT0 + 200ms, 100ms));
  CHECK(clock.TickDue(kT0 + 250ms, 100ms));
}

TEST_CASE("cluster clock: a follower's estimate advances briefly, then stands still",
          "[server][lease][clock]") {
  ClusterClock clock;
  CHECK(clock.Estimate(kT0, 200ms) == 0);  // nothing observed yet
  clock.ObserveApplied(5000, kT0);
  CHECK(clock.Estimate(kT0, 200ms) == 5000);
  CHECK(clock.Estimate(kT0 + 50ms, 200ms) == 5050);
  // No leader advancing the applied clock: the estimate stops after the cap.
  CHECK(clock.Estimate(kT0 + 10s, 200ms) == 5200);
  // The applied clock moved: the estimate follows from there.
  clock.ObserveApplied(5100, kT0 + 10s);
  CHECK(clock.Estimate(kT0 + 10s + 20ms, 200ms) == 5120);
  // A lower value (never happens in a correct store) does not move it back.
  clock.ObserveApplied(4000, kT0 + 11s);
  CHECK(clock.Estimate(kT0 + 10s + 20ms, 200ms) == 5120);
}

TEST_CASE("cluster clock: the stall before a new leader's start is measured",
          "[server][lease][clock]") {
  ClusterClock clock;
  CHECK_FALSE(clock.last_start_stall_ms().has_value());
  // As a follower: the applied clock moved to 10'000 at kT0 (the old leader's last tick).
  clock.ObserveApplied(10'000, kT0);
  // The old leader dies. 700 ms later this node leads; applying its log brings in one more stamp
  // of the old leader (10'050), then the no-op.
  clock.BecomeLeader(Term(5), LogIndex(40));
  REQUIRE(clock.MaybeStart(LogIndex(40), 10'050, kT0 + 700ms));
  REQUIRE(clock.last_start_stall_ms().has_value());
  CHECK(*clock.last_start_stall_ms() == 650);
  CHECK(clock.Now(kT0 + 700ms) == 10'050);
}

TEST_CASE("cluster clock: the published failover bound follows the timing rules",
          "[server][lease][clock]") {
  ClockTiming t;
  t.tick = 10ms;
  t.election_timeout_min_ticks = 15;
  t.max_election_timeout_ticks = 60;
  t.election_jitter_ticks = 15;
  t.max_clock_drift = 0.05;
  t.clock_tick_interval = 100ms;
  t.expiry_check_interval = 20ms;
  // 100 + ceil(75 * 10 * 1.05 + 150 + 10) = 100 + 948 = 1048
  CHECK(MaxFailoverExtensionMs(t) == 1048);
  // + ceil(10'000 * 0.05) + 20 + 150
  CHECK(MaxExtensionMs(t, 10'000) == 1048 + 500 + 20 + 150);
  // Each term is there: raising any input raises the bound.
  ClockTiming u = t;
  u.clock_tick_interval = 200ms;
  CHECK(MaxFailoverExtensionMs(u) == 1148);
  u = t;
  u.max_clock_drift = 0.10;
  CHECK(MaxFailoverExtensionMs(u) > MaxFailoverExtensionMs(t));
  u = t;
  u.max_election_timeout_ticks = 100;
  CHECK(MaxFailoverExtensionMs(u) > MaxFailoverExtensionMs(t));
}

}  // namespace
}  // namespace epoch::server
