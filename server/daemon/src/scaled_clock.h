// ScaledClock: this member's monotonic tick clock with an adjustable rate, the chaos suite's
// clock-rate fault (docs/timing-and-safety.md §1: every member's tick clock may run at a rate that
// differs from another's by up to ρ = max_clock_drift). epochd installs it, only under
// --enable-failpoints, as RaftDriverOptions::clock and LeaseOptions::clock, so the Raft ticks, the
// leader lease and the leader's cluster clock all run on it; ClockFailpoint sets its rate.
//
// At rate 1 it reads the source unchanged. Each rate change re-anchors the clock where it stands:
//
//   now = anchor_scaled + (source() - anchor_source) * rate
//
// so the clock is continuous and never goes back across changes; between changes it advances
// `rate` times as fast as the source.
//
// Threading: Now() and SetRate() may be called from any thread (one mutex; the source is read
// under it, so readers on different threads see one non-decreasing sequence).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>

namespace epoch::server {

class ScaledClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Source = std::function<TimePoint()>;

  static constexpr double kMaxRate = 2.0;

  // `source` is the underlying monotonic clock; empty means std::chrono::steady_clock.
  explicit ScaledClock(Source source = {});

  [[nodiscard]] TimePoint Now() const;

  // Rates in (0, kMaxRate] are accepted; anything else (NaN included) is refused with false and
  // leaves the clock unchanged.
  [[nodiscard]] bool SetRate(double rate);
  [[nodiscard]] double rate() const;

 private:
  [[nodiscard]] TimePoint ReadSource() const;
  [[nodiscard]] TimePoint ScaledAt(TimePoint source_now) const;  // mu_ held

  const Source source_;
  mutable std::mutex mu_;
  TimePoint anchor_source_;  // guarded by mu_: the source reading at the last rate change
  TimePoint anchor_scaled_;  // guarded by mu_: this clock's reading at that instant
  double rate_ = 1.0;        // guarded by mu_: in (0, kMaxRate]
};

}  // namespace epoch::server
