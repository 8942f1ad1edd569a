#include "systemd_notify.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace epoch::server {

SystemdNotifier::SystemdNotifier(std::function<bool()> ready, std::chrono::milliseconds poll)
    : ready_(std::move(ready)), poll_(poll) {
  if (std::getenv("NOTIFY_SOCKET") == nullptr) return;
  thread_ = std::jthread([this](std::stop_token stop) { WaitUntilReady(stop); });
}

SystemdNotifier::~SystemdNotifier() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  cv_.notify_all();
  thread_.join();
}

void SystemdNotifier::Stopping() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  Notify("STOPPING=1");
}

void SystemdNotifier::WaitUntilReady(std::stop_token stop) {
  std::unique_lock lock(mu_);
  while (!stopping_ && !stop.stop_requested()) {
    lock.unlock();
    const bool ready = ready_();
    lock.lock();
    if (ready && !stopping_) {
      Notify("READY=1");
      return;
    }
    cv_.wait_for(lock, stop, poll_, [this] { return stopping_; });
  }
}

void SystemdNotifier::Notify(const char* state) {
  // unset_environment = 0: later messages (STOPPING=1) still find NOTIFY_SOCKET.
  const int sent = sd_notify(0, state);
  if (sent < 0) {
    spdlog::warn("sd_notify {}: {}", state, std::strerror(-sent));
  } else if (sent > 0) {
    spdlog::info("told systemd {}", state);
  }
}

}  // namespace epoch::server
