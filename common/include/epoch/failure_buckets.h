// FailureBuckets: limits attempts that keep failing, per key (a user name, a client address). Each
// key has a token bucket of failures: `burst` tokens, one more every `refill`. An attempt takes a
// token before it runs (so concurrent attempts count); a success gives it back. A failure that
// leaves the bucket empty blocks the key for `refill`; each failure after that blocks it again for
// twice as long, at most `backoff_max`, until the owner forgives the key (Forgive) or a quiet
// period of `backoff_max` after the last block forgets the blocks. A refused attempt costs
// nothing and extends nothing. Users: failed Authenticate attempts (server/api
// AuthFailureLimiter) and txns refused for --max-txn-read-keys (server/api kv_write).
//
// Memory is bounded: at most kMaxKeys keys; idle keys (full bucket, not blocked) are dropped when
// the table is full, and a new key is not tracked while it stays full (its attempts pass).
//
// Threading: FailureBuckets is not thread-safe (AuthFailureLimiter keeps two under one mutex, so
// an attempt takes from both at once); FailureLimiter is one table behind a mutex. Time is passed
// in, so tests drive it.
#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace epoch {

struct FailureLimits {
  int burst = 5;
  std::chrono::milliseconds refill{10'000};
  std::chrono::milliseconds backoff_max{300'000};
};

class FailureBuckets {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxKeys = 10'000;

  struct Bucket {
    double tokens = 0;
    Clock::time_point refilled;
    Clock::time_point blocked_until;
    int blocks = 0;  // blocks since the last Forgive or quiet period
  };

  explicit FailureBuckets(const FailureLimits& limits) : limits_(limits) {}

  // The bucket of `key` refilled to `now`; nullptr when the table is full of active keys.
  [[nodiscard]] Bucket* Find(std::string_view key, Clock::time_point now);
  // Whether `b` refuses an attempt at `now` (blocked, or no token left); a null bucket never does.
  [[nodiscard]] static bool Refuses(const Bucket* b, Clock::time_point now);
  // An admitted attempt takes a token (null: nothing to take).
  static void Take(Bucket* b);
  // The attempt's outcome: a success gives the token back; a failure may block the key.
  void Finish(Bucket* b, bool failed, Clock::time_point now) const;
  // Forgets the key's blocks (a success that proves the key legitimate).
  static void Forgive(Bucket* b);

 private:
  void Refill(Bucket& b, Clock::time_point now) const;

  const FailureLimits limits_;
  std::unordered_map<std::string, Bucket> table_;
};

// One kind of key: thread-safe.
class FailureLimiter {
 public:
  using Clock = FailureBuckets::Clock;

  explicit FailureLimiter(const FailureLimits& limits) : buckets_(limits) {}

  // Whether an attempt for `key` may run at `now`; if so it took a token, and Finish must follow.
  [[nodiscard]] bool Admit(std::string_view key, Clock::time_point now);
  void Finish(std::string_view key, bool failed, Clock::time_point now);

 private:
  std::mutex mu_;
  FailureBuckets buckets_;  // guarded by mu_
};

}  // namespace epoch
