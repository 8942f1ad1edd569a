// ScaledClock (scaled_clock.h) on a hand-moved source, and ClockFailpoint's requests on it: the
// rate applies from the change on, the clock never jumps or goes back across changes, readers on
// several threads see a non-decreasing clock, and rates outside (0, 2] are refused.
#include "scaled_clock.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "clock_failpoint.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;
using TimePoint = ScaledClock::TimePoint;

// A source that moves only when told to.
struct ManualSource {
  std::atomic<TimePoint::rep> ns{1'000'000'000};
  void Advance(std::chrono::nanoseconds d) { ns.fetch_add(d.count()); }
  ScaledClock::Source Fn() {
    return [this] { return TimePoint(TimePoint::duration(ns.load())); };
  }
};

TEST_CASE("ScaledClock: rate 1 reads the source, a new rate applies from the change on",
          "[daemon][clock]") {
  ManualSource src;
  ScaledClock clock(src.Fn());
  const TimePoint t0 = clock.Now();
  CHECK(t0 == TimePoint(TimePoint::duration(1'000'000'000)));
  src.Advance(100ms);
  CHECK(clock.Now() - t0 == 100ms);

  REQUIRE(clock.SetRate(1.05));
  CHECK(clock.rate() == 1.05);
  const TimePoint t1 = clock.Now();
  CHECK(t1 - t0 == 100ms);  // no jump at the change
  src.Advance(1000ms);
  CHECK(clock.Now() - t1 == 1050ms);

  REQUIRE(clock.SetRate(0.95));
  const TimePoint t2 = clock.Now();
  CHECK(t2 - t1 == 1050ms);
  src.Advance(2000ms);
  CHECK(clock.Now() - t2 == 1900ms);
}

TEST_CASE("ScaledClock: monotonic across rate changes, never a jump", "[daemon][clock]") {
  ManualSource src;
  ScaledClock clock(src.Fn());
  TimePoint last = clock.Now();
  const double rates[] = {2.0, 0.01, 1.5, 0.5, 1.0, 0.95, 1.05, 2.0, 0.1};
  for (int i = 0; i < 90; ++i) {
    REQUIRE(clock.SetRate(rates[i % 9]));
    const TimePoint at_change = clock.Now();
    CHECK(at_change == last);  // the source did not move, so neither did the clock
    src.Advance(std::chrono::microseconds(1 + 37 * i));
    const TimePoint now = clock.Now();
    CHECK(now >= at_change);
    last = now;
  }
}

TEST_CASE(
    "ScaledClock: readers on several threads see a non-decreasing clock while the rate "
    "changes",
    "[daemon][clock]") {
  ScaledClock clock;  // the real steady_clock
  std::atomic<bool> stop{false};
  std::atomic<int> backwards{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      TimePoint last = clock.Now();
      for (int i = 0; i < 2'000'000 && !stop.load(); ++i) {
        const TimePoint now = clock.Now();
        if (now < last) backwards.fetch_add(1);
        last = now;
      }
    });
  }
  for (int i = 0; i < 2'000; ++i) REQUIRE(clock.SetRate(i % 2 == 0 ? 1.9 : 0.05));
  stop.store(true);
  for (auto& t : readers) t.join();
  CHECK(backwards.load() == 0);
}

TEST_CASE("ScaledClock: rates outside 0 < R <= 2 are refused and change nothing",
          "[daemon][clock]") {
  ManualSource src;
  ScaledClock clock(src.Fn());
  REQUIRE(clock.SetRate(1.5));
  for (double bad : {0.0, -1.0, 2.0001, 100.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    CHECK_FALSE(clock.SetRate(bad));
  }
  CHECK(clock.rate() == 1.5);
  CHECK(clock.SetRate(2.0));
}

TEST_CASE("ClockFailpoint: rate and clear set the clock, bad requests are 400", "[daemon][clock]") {
  ManualSource src;
  ScaledClock clock(src.Fn());
  ClockFailpoint fp(clock);
  CHECK(fp.Handle("/failpoint/clock?rate=1.05").code == 200);
  CHECK(clock.rate() == 1.05);
  const TimePoint t0 = clock.Now();
  src.Advance(1s);
  CHECK(clock.Now() - t0 == 1050ms);
  CHECK(fp.Handle("/failpoint/clock?clear=1").code == 200);
  CHECK(clock.rate() == 1.0);
  for (const char* bad :
       {"/failpoint/clock?rate=0", "/failpoint/clock?rate=-0.5", "/failpoint/clock?rate=2.5",
        "/failpoint/clock?rate=abc", "/failpoint/clock?rate=", "/failpoint/clock?rate=1.0x",
        "/failpoint/clock?rate=nan", "/failpoint/clock", "/failpoint/clock?speed=1",
        "/failpoint/clock?clear=0"}) {
    INFO(bad);
    CHECK(fp.Handle(bad).code == 400);
  }
  CHECK(clock.rate() == 1.0);
}

}  // namespace
}  // namespace epoch::server
