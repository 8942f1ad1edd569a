// Test fixtures for client_tests: a temporary directory, free loopback ports, child processes
// stopped by PID, and waiting on a condition with a deadline (never a fixed sleep).
//
// Threading: each fixture belongs to the test that created it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace epoch::client::testing {

// A fresh directory under $TMPDIR (or /tmp), removed recursively on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "epoch-client-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
int FreeLoopbackPort();

// Polls `condition` until it is true or `timeout` passes; returns the last result. The pause
// between polls grows from 1 ms to 50 ms.
bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// Credentials for a child that must not run as root (PostgreSQL refuses to).
struct RunAs {
  uid_t uid;
  gid_t gid;
};

// A child process (fork + exec, optionally under other credentials); stopped by PID (SIGTERM, then
// SIGKILL after a grace period) on destruction. stdout and stderr go to `log_path`.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
               const RunAs* run_as = nullptr);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] bool Running();
  // Sends `signal` and waits (bounded) for the exit. Returns true when the process is gone.
  bool Stop(int signal, std::chrono::milliseconds grace);
  // SIGSTOP, then waits (bounded) until every thread of the process is stopped: kill() returns
  // before a running thread has taken the signal, and a request sent in that window can still
  // be served. Returns true when all are stopped.
  bool Pause(std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Runs a command to completion (argv[0] is a path); returns its exit status, or -1.
int RunCommand(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
               const RunAs* run_as = nullptr);

// The last `max_bytes` of a file, for failure messages.
std::string Tail(const std::filesystem::path& path, std::size_t max_bytes = 2000);

}  // namespace epoch::client::testing
