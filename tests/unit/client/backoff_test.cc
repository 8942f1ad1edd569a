#include "epoch/client/backoff.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <vector>

namespace epoch::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

TEST_CASE("Backoff delay stays between 0.5 and 1.5 times min(cap, base*2^attempt)",
          "[client][backoff]") {
  Backoff backoff(BackoffOptions{milliseconds(10), milliseconds(1000), 0}, 42);
  const std::vector<milliseconds> ceilings = {
      milliseconds(10),   milliseconds(20),  milliseconds(40),  milliseconds(80),
      milliseconds(160),  milliseconds(320), milliseconds(640), milliseconds(1000),
      milliseconds(1000), milliseconds(1000)};
  for (std::size_t attempt = 0; attempt < ceilings.size(); ++attempt) {
    CAPTURE(attempt);
    REQUIRE(backoff.CurrentCeiling() == ceilings[attempt]);
    const nanoseconds delay = backoff.NextDelay();
    const nanoseconds ceiling = ceilings[attempt];
    REQUIRE(delay >= ceiling / 2);
    REQUIRE(delay < ceiling + ceiling / 2);
  }
  REQUIRE(backoff.attempt() == 10);
}

TEST_CASE("Backoff with the same seed repeats, different seeds differ", "[client][backoff]") {
  const BackoffOptions options{milliseconds(5), milliseconds(500), 0};
  Backoff a(options, 7);
  Backoff b(options, 7);
  Backoff c(options, 8);
  bool any_difference = false;
  for (int i = 0; i < 20; ++i) {
    const nanoseconds da = a.NextDelay();
    REQUIRE(da == b.NextDelay());
    any_difference = any_difference || da != c.NextDelay();
  }
  REQUIRE(any_difference);
}

TEST_CASE("Backoff jitter covers its range and averages to the ceiling", "[client][backoff]") {
  // At the cap every delay is cap * u with u uniform in [0.5, 1.5): check the spread, not a value.
  Backoff backoff(BackoffOptions{milliseconds(100), milliseconds(100), 0}, 1234);
  const double cap_ns = 100e6;
  double sum = 0;
  double lowest = 2.0;
  double highest = 0.0;
  const int samples = 10'000;
  for (int i = 0; i < samples; ++i) {
    const double factor = static_cast<double>(backoff.NextDelay().count()) / cap_ns;
    sum += factor;
    lowest = std::min(lowest, factor);
    highest = std::max(highest, factor);
  }
  REQUIRE(lowest >= 0.5);
  REQUIRE(highest < 1.5);
  REQUIRE(lowest < 0.51);  // both ends of the range are reached
  REQUIRE(highest > 1.49);
  REQUIRE(sum / samples == Approx(1.0).epsilon(0.02));
}

TEST_CASE("Backoff Reset restarts from base, max_attempts bounds the loop", "[client][backoff]") {
  Backoff backoff(BackoffOptions{milliseconds(1), milliseconds(64), 3}, 9);
  REQUIRE_FALSE(backoff.Exhausted());
  (void)backoff.NextDelay();
  (void)backoff.NextDelay();
  REQUIRE(backoff.CurrentCeiling() == milliseconds(4));
  (void)backoff.NextDelay();
  REQUIRE(backoff.Exhausted());
  backoff.Reset();
  REQUIRE_FALSE(backoff.Exhausted());
  REQUIRE(backoff.CurrentCeiling() == milliseconds(1));
}

TEST_CASE("Backoff ceiling never overflows after many attempts", "[client][backoff]") {
  Backoff backoff(BackoffOptions{milliseconds(1), milliseconds(30'000), 0}, 3);
  for (int i = 0; i < 500; ++i) (void)backoff.NextDelay();
  REQUIRE(backoff.CurrentCeiling() == milliseconds(30'000));
  const nanoseconds delay = backoff.NextDelay();
  REQUIRE(delay >= milliseconds(15'000));
  REQUIRE(delay < milliseconds(45'000));
}

}  // namespace
}  // namespace epoch::client
