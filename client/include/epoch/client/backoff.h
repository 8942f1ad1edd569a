// Backoff: exponential backoff with full jitter for client retries (docs/architecture.md §9).
//
//   delay(attempt) = min(cap, base · 2^attempt) · u,   u uniform in [0.5, 1.5)
//
// attempt counts from 0, so the first delay is about `base`. The jitter spreads clients that failed
// together (a leader crash fails every client at once) so that they do not retry in lock-step. Note
// that the jitter factor applies after the cap, so a delay can reach 1.5 · cap.
//
// Determinism: the random source is a seeded std::mt19937_64 and the uniform factor is computed
// from its raw 64-bit output (not std::uniform_real_distribution, whose output differs between
// standard libraries), so one seed gives the same delays everywhere.
//
// Who calls it: Client (retries of idempotent calls), Session (re-establishing a keep-alive
// stream), the job runner (after losing a lease). Threading: not thread-safe; one Backoff per retry
// loop.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace epoch::client {

struct BackoffOptions {
  std::chrono::milliseconds base{50};
  std::chrono::milliseconds cap{2000};
  // 0 = unbounded. Otherwise Exhausted() becomes true after this many NextDelay() calls.
  int max_attempts = 0;
};

class Backoff {
 public:
  Backoff(BackoffOptions options, std::uint64_t seed);

  // The delay before the next retry; advances the attempt counter.
  [[nodiscard]] std::chrono::nanoseconds NextDelay();

  // The un-jittered ceiling of the next delay: min(cap, base · 2^attempt).
  [[nodiscard]] std::chrono::nanoseconds CurrentCeiling() const;

  // After a success: the next failure starts again from `base`.
  void Reset() { attempt_ = 0; }

  [[nodiscard]] int attempt() const { return attempt_; }
  [[nodiscard]] bool Exhausted() const {
    return options_.max_attempts > 0 && attempt_ >= options_.max_attempts;
  }
  [[nodiscard]] const BackoffOptions& options() const { return options_; }

 private:
  // A uniform double in [0.5, 1.5) from 53 random bits.
  double JitterFactor();

  BackoffOptions options_;
  std::mt19937_64 rng_;
  int attempt_ = 0;  // number of NextDelay() calls since construction or Reset()
};

}  // namespace epoch::client
