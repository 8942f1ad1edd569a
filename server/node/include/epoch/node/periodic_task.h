// PeriodicTask: calls `tick` every `interval` on an executor, from Start() until Stop() or until
// `tick` returns false. A tick runs under the task's lock, so once Stop() has returned no tick is
// running and none will start: the owner may be destroyed once the executor's queued work has run
// (the node joins its read pool before destroying what uses it). A tick must therefore not call
// Start() or Stop() itself, and must not block.
//
// Threading: Start/Stop from any thread; ticks run on the executor, one at a time.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <functional>
#include <mutex>
#include <utility>

namespace epoch::server {

class PeriodicTask {
 public:
  PeriodicTask(asio::any_io_executor executor, std::chrono::milliseconds interval,
               std::function<bool()> tick)
      : interval_(interval), tick_(std::move(tick)), timer_(std::move(executor)) {}
  ~PeriodicTask() { Stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  void Start() {
    std::lock_guard lock(mu_);
    if (!stopped_) ScheduleLocked();
  }

  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    timer_.cancel();
  }

 private:
  void ScheduleLocked() {
    timer_.expires_after(interval_);
    timer_.async_wait([this](std::error_code ec) {
      if (ec) return;
      std::lock_guard lock(mu_);
      if (stopped_ || !tick_()) return;
      ScheduleLocked();
    });
  }

  const std::chrono::milliseconds interval_;
  const std::function<bool()> tick_;
  std::mutex mu_;
  bool stopped_ = false;      // guarded by mu_
  asio::steady_timer timer_;  // guarded by mu_
};

}  // namespace epoch::server
