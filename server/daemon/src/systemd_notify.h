// SystemdNotifier: epochd's side of systemd's Type=notify protocol (sd_notify(3), libsystemd).
// Sends READY=1 once `ready()` holds — main() passes EpochNode::JoinedAndApplied — and
// STOPPING=1 from Stopping(). When NOTIFY_SOCKET is not set (epochd not started by systemd as a
// notify service), it starts no thread and sends nothing.
//
// Threading: its own thread evaluates `ready()` every `poll` until it holds or the notifier is
// destroyed; Stopping() may be called from any thread; the destructor joins the thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

namespace epoch::server {

class SystemdNotifier {
 public:
  explicit SystemdNotifier(std::function<bool()> ready,
                           std::chrono::milliseconds poll = std::chrono::milliseconds(50));
  ~SystemdNotifier();  // stops and joins the thread
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // Tells systemd the service is stopping (STOPPING=1); READY=1 is not sent after it.
  void Stopping();

 private:
  void WaitUntilReady(std::stop_token stop);
  void Notify(const char* state);

  const std::function<bool()> ready_;
  const std::chrono::milliseconds poll_;
  std::mutex mu_;
  std::condition_variable_any cv_;
  bool stopping_ = false;  // guarded by mu_
  std::jthread thread_;    // last: started when everything above is initialised
};

}  // namespace epoch::server
