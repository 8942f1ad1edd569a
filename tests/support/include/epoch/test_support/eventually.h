// Waiting for a condition with a deadline, for tests whose threads (drivers, lease managers) or
// processes (servers, clients, workers) publish state asynchronously. No fixed sleeps: the wait
// ends as soon as the condition holds.
//
// WaitUntil(deadline, condition) calls `condition` until it returns true or `deadline` passes and
// returns whether it held. The condition is called at least once, and once more at the deadline.
// Between calls the thread sleeps 1 ms, the pause doubling after each call up to `max_pause`:
// kThreadPoll (1 ms) for state that threads of the test process publish, kProcessPoll (20 ms) for
// state behind an RPC, a child process or a file, so that an expensive condition is not called in
// a tight loop. Eventually(condition, timeout) is WaitUntil(now + timeout, condition).
//
// Threading: the condition runs on the calling thread; what it reads must be safe to read there
// (atomics, a mutex, the test's own objects).
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace epoch::test_support {

inline constexpr std::chrono::milliseconds kThreadPoll{1};
inline constexpr std::chrono::milliseconds kProcessPoll{20};
inline constexpr std::chrono::milliseconds kDefaultWait{10'000};

template <typename Condition>
bool WaitUntil(std::chrono::steady_clock::time_point deadline, Condition&& condition,
               std::chrono::milliseconds max_pause = kThreadPoll) {
  std::chrono::milliseconds pause = std::min(kThreadPoll, max_pause);
  while (true) {
    if (condition()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, max_pause);
  }
}

template <typename Condition>
bool Eventually(Condition&& condition, std::chrono::milliseconds timeout = kDefaultWait,
                std::chrono::milliseconds max_pause = kThreadPoll) {
  return WaitUntil(std::chrono::steady_clock::now() + timeout, condition, max_pause);
}

}  // namespace epoch::test_support
