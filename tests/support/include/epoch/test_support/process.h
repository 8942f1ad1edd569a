// Child processes for process-level tests: a long-running server whose output goes to a log file
// (ChildProcess; or an interactive command fed through a pipe), and a short command run to
// completion with its stdin fed and its stdout, stderr and exit code captured (RunCommand, used for
// etcdctl).
//
// Every child is started with fork + execve and PR_SET_PDEATHSIG = SIGKILL, so it dies with the
// thread that started it: a test binary killed by ctest's timeout leaves no server behind. Start
// children from a thread that outlives them (the test's main thread). A ChildProcess that is still
// running when destroyed is SIGKILLed and reaped.
//
// Threading: a ChildProcess is used from one thread at a time. RunCommand may be called from many
// threads at once (each call owns its pipes and child).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"

namespace epoch::test {

struct CommandResult {
  int exit_code = -1;      // the exit status, or 128 + signal if killed by a signal
  bool timed_out = false;  // killed by RunCommand because it ran past its timeout
  std::string out;         // everything written to stdout
  std::string err;         // everything written to stderr

  // "exit=N out=... err=..." for test failure messages.
  [[nodiscard]] std::string Describe() const;
};

// Runs argv[0] (a path, not searched in PATH) with `argv`, the current environment plus
// `extra_env` ("NAME=value"), `stdin_data` on its stdin (then closed), until it exits or
// `timeout` passes (then SIGKILL; timed_out is set).
[[nodiscard]] CommandResult RunCommand(const std::vector<std::string>& argv,
                                       std::string_view stdin_data,
                                       std::chrono::milliseconds timeout,
                                       const std::vector<std::string>& extra_env = {});

class ChildProcess {
 public:
  // Starts argv[0] with stdin from /dev/null and stdout + stderr appended to `log_path`.
  [[nodiscard]] static Result<ChildProcess> Spawn(const std::vector<std::string>& argv,
                                                  const std::string& log_path);
  // Starts argv[0] (with the environment plus `extra_env`) with stdout written to `out_path` and
  // stderr to `err_path` (both truncated) and stdin from a pipe whose write end is returned in
  // *stdin_fd: the test writes the input as it goes and closes it (interactive commands).
  [[nodiscard]] static Result<ChildProcess> SpawnWithStdinPipe(
      const std::vector<std::string>& argv, const std::string& out_path,
      const std::string& err_path, int* stdin_fd, const std::vector<std::string>& extra_env = {});

  ChildProcess() = default;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // True while the process has not exited (a stopped process is running). Reaps it if it exited.
  [[nodiscard]] bool Running();
  // The exit status once it exited (128 + signal when killed by a signal).
  [[nodiscard]] std::optional<int> exit_status() const { return exit_status_; }

  // Sends `signal` if the process is still running.
  void Signal(int signal);
  // Waits until the process exits or `timeout` passes; returns its exit status if it exited.
  std::optional<int> WaitExit(std::chrono::milliseconds timeout);
  // SIGKILL (after SIGCONT, so a stopped process dies at once) and reap. Idempotent.
  void KillAndReap();

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  void Reaped(int wait_status);

  pid_t pid_ = -1;                  // -1 once reaped (or never started)
  std::optional<int> exit_status_;  // set when reaped
};

}  // namespace epoch::test
