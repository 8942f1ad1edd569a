// History vocabulary of the linearizability checker: an operation as a client saw it (call time,
// return time or "never returned", input, output), the verdicts, the search budget and the result.
//
// Who uses it: whoever records client histories (the seeded simulator in tests/sim, the process-
// level chaos suite) and hands them to lincheck::Check (checker.h).
//
// Time is any monotonic integer clock shared by all clients of one history (simulated
// microseconds, CLOCK_MONOTONIC nanoseconds, ...). Intervals are closed: an operation returning at
// t overlaps one called at t (Porcupine's convention; with a coarse monotonic clock two events can
// share a timestamp, and we must not invent an order between them).
//
// Threading: plain values; no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace epoch::lincheck {

// Return time of an operation whose outcome is unknown (the client timed out, or crashed before
// the answer): it may have taken effect at any time after its call, or never. The checker lets it
// linearize anywhere after its call, including after every other operation (= "never").
inline constexpr std::int64_t kNeverReturned = std::numeric_limits<std::int64_t>::max();

template <typename Input, typename Output>
struct Operation {
  std::uint64_t client_id = 0;
  std::int64_t call_time = 0;
  std::int64_t return_time = kNeverReturned;  // >= call_time, or kNeverReturned
  Input input{};
  Output output{};  // meaningful only if the model says so for never-returned operations
};

enum class Verdict : std::uint8_t {
  kOk,       // every partition has a linearization
  kIllegal,  // some partition has none: the history is not linearizable
  kUnknown,  // the budget ran out (or the history is malformed) before an answer: NOT a pass
};

[[nodiscard]] constexpr std::string_view VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kOk: return "ok";
    case Verdict::kIllegal: return "illegal";
    case Verdict::kUnknown: return "unknown";
  }
  return "?";
}

// Limits for one Check() call (all partitions together). Zero means "no limit". The step budget
// makes tests deterministic; the time limit protects long campaigns from a pathological history.
struct Budget {
  std::chrono::nanoseconds time_limit{0};
  std::uint64_t max_steps = 0;
};

struct CheckResult {
  Verdict verdict = Verdict::kOk;
  std::size_t partitions = 0;  // partitions searched
  std::size_t operations = 0;  // operations in the history
  std::size_t max_partition_ops = 0;
  std::uint64_t steps = 0;  // search steps over all partitions searched
  // For kIllegal / kUnknown: the partition (its key) where the search failed or stopped, and a
  // human-readable account: for kIllegal the longest linearizable prefix found, the state after
  // it, and the operations none of which could be placed next.
  std::string failing_partition;
  std::string description;

  [[nodiscard]] bool Ok() const { return verdict == Verdict::kOk; }
};

}  // namespace epoch::lincheck
