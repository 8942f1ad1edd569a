// Test fixtures for client_tests and jobs_tests: free loopback ports, child processes stopped by
// PID (with optional other credentials), and `etcdctl lock` as the other party of a lock.
// Temporary directories, waiting on a condition and reading files come from tests/support
// (epoch/test_support/).
//
// Threading: each fixture belongs to the test that created it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace epoch::client::testing {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then closed).
int FreeLoopbackPort();

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

// `etcdctl lock NAME -- sh -c ...` (ETCDCTL_API=3) holding the lock until the test calls
// Release(): once etcdctl holds the lock, the shell prints "held rev=<revision> key=<key>" to
// <dir>/etcdctl.log and waits (at most 60 s) for the file <dir>/release.
struct EtcdctlLock {
  EtcdctlLock(const std::string& etcdctl_path, const std::string& endpoints,
              const std::string& name, const std::filesystem::path& dir);

  // Whether etcdctl holds the lock (its command has started).
  [[nodiscard]] bool Holds() const;
  // The lock's revision and key as etcdctl reported them; -1 and "" before it holds the lock.
  [[nodiscard]] std::int64_t Rev() const;
  [[nodiscard]] std::string Key() const;
  // Lets the command finish; etcdctl then releases the lock and exits.
  void Release() const;

  std::filesystem::path release;
  std::filesystem::path log;
  std::unique_ptr<ChildProcess> process;
};

}  // namespace epoch::client::testing
