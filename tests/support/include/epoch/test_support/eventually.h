// Eventually: polls a condition in real time until it holds or 10 s pass, for tests whose threads
// (drivers, lease managers) publish state asynchronously. No fixed sleeps: the wait ends as soon as
// the condition holds.
#pragma once

#include <chrono>
#include <thread>

namespace epoch::test_support {

template <typename Condition>
bool Eventually(Condition condition) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling, not a fixed wait
  }
  return condition();
}

}  // namespace epoch::test_support
