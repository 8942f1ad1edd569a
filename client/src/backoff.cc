#include "epoch/client/backoff.h"

#include <cassert>

namespace epoch::client {

Backoff::Backoff(BackoffOptions options, std::uint64_t seed) : options_(options), rng_(seed) {
  assert(options_.base.count() > 0);
  assert(options_.cap >= options_.base);
  assert(options_.max_attempts >= 0);
}

std::chrono::nanoseconds Backoff::CurrentCeiling() const {
  const std::chrono::nanoseconds base = options_.base;
  const std::chrono::nanoseconds cap = options_.cap;
  // Double until the cap is reached; never shift far enough to overflow.
  std::chrono::nanoseconds ceiling = base;
  for (int i = 0; i < attempt_ && ceiling < cap; ++i) ceiling *= 2;
  return ceiling < cap ? ceiling : cap;
}

double Backoff::JitterFactor() {
  const std::uint64_t bits = rng_() >> 11;                    // 53 bits
  const double unit = static_cast<double>(bits) * 0x1.0p-53;  // [0, 1)
  return 0.5 + unit;
}

std::chrono::nanoseconds Backoff::NextDelay() {
  const std::chrono::nanoseconds ceiling = CurrentCeiling();
  ++attempt_;
  const double jittered = static_cast<double>(ceiling.count()) * JitterFactor();
  return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(jittered));
}

}  // namespace epoch::client
