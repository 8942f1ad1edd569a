#include "scaled_clock.h"

#include <cmath>

namespace epoch::server {

ScaledClock::ScaledClock(Source source) : source_(std::move(source)) {
  anchor_source_ = ReadSource();
  anchor_scaled_ = anchor_source_;
}

ScaledClock::TimePoint ScaledClock::ReadSource() const {
  return source_ ? source_() : std::chrono::steady_clock::now();
}

// Multiplying the elapsed source time by a positive constant and rounding down is non-decreasing
// in the elapsed time, so the clock never goes back between changes.
ScaledClock::TimePoint ScaledClock::ScaledAt(TimePoint source_now) const {
  const auto elapsed = std::chrono::duration<double, std::nano>(source_now - anchor_source_);
  return anchor_scaled_ + std::chrono::duration_cast<TimePoint::duration>(elapsed * rate_);
}

ScaledClock::TimePoint ScaledClock::Now() const {
  std::lock_guard lock(mu_);
  return ScaledAt(ReadSource());
}

bool ScaledClock::SetRate(double rate) {
  if (!(rate > 0.0 && rate <= kMaxRate) || !std::isfinite(rate)) return false;
  std::lock_guard lock(mu_);
  const TimePoint source_now = ReadSource();
  anchor_scaled_ = ScaledAt(source_now);
  anchor_source_ = source_now;
  rate_ = rate;
  return true;
}

double ScaledClock::rate() const {
  std::lock_guard lock(mu_);
  return rate_;
}

}  // namespace epoch::server
