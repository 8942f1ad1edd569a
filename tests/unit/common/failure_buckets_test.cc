// FailureLimiter: one kind of key's failure buckets behind a mutex (the semantics shared with the
// Authenticate limiter, whose tests cover the doubling blocks): a burst, blocks after it,
// successes that cost nothing, and keys that do not affect each other.
#include "epoch/failure_buckets.h"

#include <catch2/catch.hpp>
#include <string>

namespace epoch {
namespace {

using Clock = FailureLimiter::Clock;
using std::chrono::milliseconds;

constexpr FailureLimits kLimits{2, milliseconds(100), milliseconds(1000)};

bool Fail(FailureLimiter& l, const std::string& key, Clock::time_point now) {
  if (!l.Admit(key, now)) return false;
  l.Finish(key, /*failed=*/true, now);
  return true;
}

TEST_CASE("failure limiter: a burst per key, then a block of one refill", "[common][limits]") {
  FailureLimiter l(kLimits);
  const Clock::time_point t0{};
  CHECK(Fail(l, "ipv4:10.0.0.1", t0));
  CHECK(Fail(l, "ipv4:10.0.0.1", t0));
  CHECK_FALSE(l.Admit("ipv4:10.0.0.1", t0 + milliseconds(99)));
  CHECK(l.Admit("ipv4:10.0.0.2", t0));  // another key is not affected
  l.Finish("ipv4:10.0.0.2", /*failed=*/false, t0);
  CHECK(Fail(l, "ipv4:10.0.0.1", t0 + milliseconds(100)));
  // Failed again while blocked before: twice as long.
  CHECK_FALSE(l.Admit("ipv4:10.0.0.1", t0 + milliseconds(299)));
  CHECK(l.Admit("ipv4:10.0.0.1", t0 + milliseconds(300)));
}

TEST_CASE("failure limiter: successes give their token back", "[common][limits]") {
  FailureLimiter l(kLimits);
  const Clock::time_point t0{};
  for (int i = 0; i < 100; ++i) {
    REQUIRE(l.Admit("k", t0));
    l.Finish("k", /*failed=*/false, t0);
  }
  // Concurrent attempts each hold a token until they finish.
  CHECK(l.Admit("k", t0));
  CHECK(l.Admit("k", t0));
  CHECK_FALSE(l.Admit("k", t0));
}

TEST_CASE("failure limiter: a full table still admits new keys", "[common][limits]") {
  FailureLimiter l(kLimits);
  const Clock::time_point t0{};
  // Every key blocked: none is idle, so none can be dropped for a new one.
  for (std::size_t i = 0; i < FailureBuckets::kMaxKeys; ++i) {
    const std::string key = std::to_string(i);
    REQUIRE(Fail(l, key, t0));
    REQUIRE(Fail(l, key, t0));
  }
  CHECK(Fail(l, "new", t0));
  CHECK(Fail(l, "new", t0));
  CHECK(l.Admit("new", t0));  // untracked: its attempts pass
}

}  // namespace
}  // namespace epoch
