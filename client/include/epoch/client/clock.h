// Clock: the monotonic time source of the client library, injected so that the session state
// machine, backoff sleeps and call deadlines can be driven by a test without real waiting.
//
// Who calls it: SessionCore reads Now(); Session and Client use SteadyClock. Tests use FakeClock.
// Never a wall clock: safety decisions in Epoch use monotonic time only
// (docs/timing-and-safety.md).
//
// Threading: SteadyClock is stateless and thread-safe. FakeClock is thread-safe (an atomic), so a
// test thread may advance it while another thread reads it.
#pragma once

#include <atomic>
#include <chrono>

namespace epoch::client {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual TimePoint Now() const = 0;
};

// The process' monotonic clock (CLOCK_MONOTONIC on Linux).
class SteadyClock final : public Clock {
 public:
  [[nodiscard]] TimePoint Now() const override { return std::chrono::steady_clock::now(); }

  // One shared instance; the class has no state.
  static SteadyClock* Instance() {
    static SteadyClock clock;
    return &clock;
  }
};

// A clock that only moves when told to. Starts at an arbitrary non-zero point so that code which
// wrongly treats TimePoint{} as "unset" shows up in tests.
class FakeClock final : public Clock {
 public:
  FakeClock() : now_ns_(kStartNs) {}

  [[nodiscard]] TimePoint Now() const override {
    return TimePoint(Duration(now_ns_.load(std::memory_order_acquire)));
  }
  void Advance(Duration d) { now_ns_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  static constexpr Duration::rep kStartNs = 1'000'000'000'000;  // 1000 s after the epoch
  std::atomic<Duration::rep> now_ns_;
};

}  // namespace epoch::client
