// Brute-force protection of Authenticate: a burst of failures per user and per address, one more
// per refill, blocks that double up to the cap, a success forgiving the user, and the peer
// string's host.
#include "auth_failure_limiter.h"

#include <catch2/catch.hpp>

namespace epoch::server {
namespace {

using Clock = AuthFailureLimiter::Clock;
using std::chrono::milliseconds;

constexpr FailureLimits kLimits{3, milliseconds(1000), milliseconds(4000)};

// One attempt at `now` that fails if admitted; whether it was admitted.
bool Fail(AuthFailureLimiter& l, std::string_view user, std::string_view host,
          Clock::time_point now) {
  if (!l.Admit(user, host, now)) return false;
  l.Finish(user, host, /*failed=*/true, now);
  return true;
}

TEST_CASE("auth limiter: a burst of failures, then blocks that double up to the cap",
          "[api][auth]") {
  AuthFailureLimiter l(kLimits);
  const Clock::time_point t0{};
  for (int i = 0; i < 3; ++i) CHECK(Fail(l, "w", "ipv4:10.0.0.1", t0));
  // The bucket is empty: blocked for one refill.
  CHECK(!Fail(l, "w", "ipv4:10.0.0.2", t0 + milliseconds(999)));
  CHECK(Fail(l, "w", "ipv4:10.0.0.2", t0 + milliseconds(1000)));
  // Failed again at once: blocked for twice as long, then four times (the cap).
  CHECK(!Fail(l, "w", "ipv4:10.0.0.3", t0 + milliseconds(2999)));
  CHECK(Fail(l, "w", "ipv4:10.0.0.3", t0 + milliseconds(3000)));
  CHECK(!Fail(l, "w", "ipv4:10.0.0.4", t0 + milliseconds(6999)));
  CHECK(Fail(l, "w", "ipv4:10.0.0.4", t0 + milliseconds(7000)));
  CHECK(!Fail(l, "w", "ipv4:10.0.0.5", t0 + milliseconds(10'999)));
  CHECK(Fail(l, "w", "ipv4:10.0.0.5", t0 + milliseconds(11'000)));  // 4000: the cap held
  // Another user from other addresses is not affected.
  CHECK(Fail(l, "x", "ipv4:10.0.0.9", t0 + milliseconds(11'000)));
}

TEST_CASE("auth limiter: one address guessing many users is limited", "[api][auth]") {
  AuthFailureLimiter l(kLimits);
  const Clock::time_point t0{};
  CHECK(Fail(l, "a", "ipv4:10.0.0.1", t0));
  CHECK(Fail(l, "b", "ipv4:10.0.0.1", t0));
  CHECK(Fail(l, "c", "ipv4:10.0.0.1", t0));
  CHECK(!Fail(l, "d", "ipv4:10.0.0.1", t0));
  CHECK(Fail(l, "d", "ipv4:10.0.0.2", t0));
}

TEST_CASE("auth limiter: successes cost nothing and forgive the user's blocks", "[api][auth]") {
  AuthFailureLimiter l(kLimits);
  const Clock::time_point t0{};
  for (int i = 0; i < 10; ++i) {
    REQUIRE(l.Admit("w", "h0", t0));
    l.Finish("w", "h0", /*failed=*/false, t0);
  }
  for (int i = 0; i < 3; ++i) CHECK(Fail(l, "w", "h1", t0));
  CHECK(Fail(l, "w", "h2", t0 + milliseconds(1000)));  // blocked 2000 ms from here
  // A success once the block ended (2 tokens back by then) clears the block count.
  REQUIRE(l.Admit("w", "h3", t0 + milliseconds(3000)));
  l.Finish("w", "h3", /*failed=*/false, t0 + milliseconds(3000));
  CHECK(Fail(l, "w", "h4", t0 + milliseconds(3000)));
  CHECK(Fail(l, "w", "h4", t0 + milliseconds(3000)));
  // Emptied again: one refill, not four.
  CHECK(!Fail(l, "w", "h5", t0 + milliseconds(3999)));
  CHECK(Fail(l, "w", "h5", t0 + milliseconds(4000)));
}

TEST_CASE("auth limiter: concurrent attempts each take a token before the check", "[api][auth]") {
  AuthFailureLimiter l(kLimits);
  const Clock::time_point t0{};
  CHECK(l.Admit("w", "h", t0));
  CHECK(l.Admit("w", "h", t0));
  CHECK(l.Admit("w", "h", t0));
  CHECK(!l.Admit("w", "h", t0));
}

TEST_CASE("auth limiter: the host of a gRPC peer string", "[api][auth]") {
  CHECK(PeerHost("ipv4:127.0.0.1:5000") == "ipv4:127.0.0.1");
  CHECK(PeerHost("ipv6:[::1]:5000") == "ipv6:[::1]");
  CHECK(PeerHost("unix:/tmp/sock") == "unix:/tmp/sock");
  CHECK(PeerHost("unknown") == "unknown");
}

}  // namespace
}  // namespace epoch::server
