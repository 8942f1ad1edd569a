#include "epoch/test_support/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>

#include "epoch/test_support/eventually.h"

extern char** environ;

namespace epoch::test {
namespace {

constexpr auto kReapPoll = std::chrono::milliseconds(2);

// argv/envp as the NULL-terminated arrays execve wants. Built before fork(): the child of a
// multithreaded process may only call async-signal-safe functions.
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> argv;
  std::vector<char*> envp;

  ExecArgs(const std::vector<std::string>& args, const std::vector<std::string>& extra_env) {
    storage = args;
    std::size_t env_start = storage.size();
    for (char** e = environ; *e != nullptr; ++e) storage.emplace_back(*e);
    for (const std::string& e : extra_env) storage.push_back(e);
    for (std::size_t i = 0; i < env_start; ++i) argv.push_back(storage[i].data());
    argv.push_back(nullptr);
    for (std::size_t i = env_start; i < storage.size(); ++i) envp.push_back(storage[i].data());
    envp.push_back(nullptr);
  }
};

// In the child, after fork: die with the parent, wire stdio, close every other inherited fd,
// exec. Only async-signal-safe calls.
[[noreturn]] void ExecChild(const ExecArgs& args, pid_t parent, int in_fd, int out_fd, int err_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(127);
  close_range(3, ~0U, 0);
  // Signals blocked by the test process (e.g. by a sigwait thread) must not stay blocked.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGPIPE, SIG_DFL);
  execve(args.argv[0], args.argv.data(), args.envp.data());
  _exit(127);
}

int DecodeWaitStatus(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

void IgnoreSigpipeOnce() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Pumps stdin/stdout/stderr of a RunCommand child until both outputs close or the deadline.
// Returns false on timeout.
bool PumpPipes(int in_fd, int out_fd, int err_fd, std::string_view input, CommandResult* result,
               std::chrono::steady_clock::time_point deadline) {
  std::size_t written = 0;
  if (input.empty()) {
    close(in_fd);
    in_fd = -1;
  }
  char buf[65536];
  while (out_fd >= 0 || err_fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd fds[3] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}, {in_fd, POLLOUT, 0}};
    if (poll(fds, 3, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    int* outs[2] = {&out_fd, &err_fd};
    std::string* sinks[2] = {&result->out, &result->err};
    for (int i = 0; i < 2; ++i) {
      if (*outs[i] < 0 || fds[i].revents == 0) continue;
      ssize_t n = read(*outs[i], buf, sizeof(buf));
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(*outs[i]);
        *outs[i] = -1;
      }
    }
    if (in_fd >= 0 && fds[2].revents != 0) {
      ssize_t n = write(in_fd, input.data() + written, input.size() - written);
      if (n > 0) written += static_cast<std::size_t>(n);
      if ((n < 0 && errno != EAGAIN && errno != EINTR) || written == input.size()) {
        close(in_fd);
        in_fd = -1;
      }
    }
  }
  for (int fd : {in_fd, out_fd, err_fd}) {
    if (fd >= 0) close(fd);
  }
  return std::chrono::steady_clock::now() < deadline;
}

}  // namespace

std::string CommandResult::Describe() const {
  return fmt::format("exit={}{} stdout=[{}] stderr=[{}]", exit_code,
                     timed_out ? " (timed out)" : "", out, err);
}

CommandResult RunCommand(const std::vector<std::string>& argv, std::string_view stdin_data,
                         std::chrono::milliseconds timeout,
                         const std::vector<std::string>& extra_env) {
  IgnoreSigpipeOnce();
  CommandResult result;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    result.err = fmt::format("pipe: {}", std::strerror(errno));
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) close(fd);
    }
    return result;
  }
  ExecArgs args(argv, extra_env);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecChild(args, parent, in[0], out[1], err[1]);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    for (int fd : {in[1], out[0], err[0]}) close(fd);
    result.err = fmt::format("fork: {}", std::strerror(errno));
    return result;
  }
  for (int fd : {in[1], out[0], err[0]}) SetNonBlocking(fd);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool in_time = PumpPipes(in[1], out[0], err[0], stdin_data, &result, deadline);
  int wait_status = 0;
  // The outputs closed, so the child is exiting; give it until the deadline.
  if (in_time) {
    in_time = test_support::WaitUntil(
        deadline, [&] { return waitpid(pid, &wait_status, WNOHANG) != 0; }, kReapPoll);
  }
  if (!in_time) {
    result.timed_out = true;
    kill(pid, SIGKILL);
    waitpid(pid, &wait_status, 0);
  }
  result.exit_code = DecodeWaitStatus(wait_status);
  return result;
}

Result<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv,
                                         const std::string& log_path) {
  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return Status::IOError(fmt::format("open {}: {}", log_path, std::strerror(errno)));
  }
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    close(log_fd);
    return Status::IOError(fmt::format("open /dev/null: {}", std::strerror(errno)));
  }
  ExecArgs args(argv, {});
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecChild(args, parent, null_fd, log_fd, log_fd);
  close(log_fd);
  close(null_fd);
  if (pid < 0) return Status::IOError(fmt::format("fork: {}", std::strerror(errno)));
  return ChildProcess(pid);
}

Result<ChildProcess> ChildProcess::SpawnWithStdinPipe(const std::vector<std::string>& argv,
                                                      const std::string& out_path,
                                                      const std::string& err_path, int* stdin_fd,
                                                      const std::vector<std::string>& extra_env) {
  IgnoreSigpipeOnce();
  int in[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) != 0) {
    return Status::IOError(fmt::format("pipe: {}", std::strerror(errno)));
  }
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const auto close_all = [&] {
    for (int fd : {in[0], out_fd, err_fd}) {
      if (fd >= 0) close(fd);
    }
  };
  if (out_fd < 0 || err_fd < 0) {
    close_all();
    close(in[1]);
    return Status::IOError(
        fmt::format("open {} / {}: {}", out_path, err_path, std::strerror(errno)));
  }
  ExecArgs args(argv, extra_env);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) ExecChild(args, parent, in[0], out_fd, err_fd);
  close_all();
  if (pid < 0) {
    close(in[1]);
    return Status::IOError(fmt::format("fork: {}", std::strerror(errno)));
  }
  *stdin_fd = in[1];
  return ChildProcess(pid);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), exit_status_(other.exit_status_) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
  if (this != &other) {
    KillAndReap();
    pid_ = std::exchange(other.pid_, -1);
    exit_status_ = other.exit_status_;
  }
  return *this;
}

ChildProcess::~ChildProcess() { KillAndReap(); }

void ChildProcess::Reaped(int wait_status) {
  exit_status_ = DecodeWaitStatus(wait_status);
  pid_ = -1;
}

bool ChildProcess::Running() {
  if (pid_ < 0) return false;
  int wait_status = 0;
  pid_t r = waitpid(pid_, &wait_status, WNOHANG);
  if (r == pid_) {
    Reaped(wait_status);
    return false;
  }
  return r == 0;
}

void ChildProcess::Signal(int signal) {
  if (Running()) kill(pid_, signal);
}

std::optional<int> ChildProcess::WaitExit(std::chrono::milliseconds timeout) {
  if (!test_support::Eventually([this] { return !Running(); }, timeout, kReapPoll)) {
    return std::nullopt;
  }
  return exit_status_;
}

void ChildProcess::KillAndReap() {
  if (pid_ < 0) return;
  kill(pid_, SIGKILL);
  kill(pid_, SIGCONT);
  int wait_status = 0;
  if (waitpid(pid_, &wait_status, 0) == pid_) Reaped(wait_status);
  pid_ = -1;
}

}  // namespace epoch::test
