#include "test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"

extern char** environ;

namespace epoch::client::testing {

int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    throw std::runtime_error("bind failed");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

namespace {

pid_t Spawn(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
            const RunAs* run_as) {
  // Everything the child needs is prepared before fork: between fork and exec only
  // async-signal-safe calls (open, dup2, setgid, setgroups, setuid, execve).
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const std::string log = log_path.string();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    if (run_as != nullptr) {
      const gid_t groups[] = {run_as->gid};
      if (::setgroups(1, groups) != 0 || ::setgid(run_as->gid) != 0 || ::setuid(run_as->uid) != 0) {
        ::_exit(125);
      }
    }
    ::execve(args[0], args.data(), environ);
    ::_exit(127);
  }
  return pid;
}

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::filesystem::path& log_path, const RunAs* run_as)
    : pid_(Spawn(argv, log_path, run_as)) {}

ChildProcess::~ChildProcess() {
  if (!Stop(SIGTERM, std::chrono::milliseconds(10'000))) Stop(SIGKILL, std::chrono::seconds(10));
}

bool ChildProcess::Running() {
  if (reaped_) return false;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) reaped_ = true;
  return !reaped_;
}

bool ChildProcess::Stop(int signal, std::chrono::milliseconds grace) {
  if (!Running()) return true;
  ::kill(pid_, signal);
  ::kill(pid_, SIGCONT);  // a SIGSTOPped child acts on the signal only once continued
  return test_support::Eventually([this] { return !Running(); }, grace, test_support::kProcessPoll);
}

namespace {

// Whether every thread of `pid` is in state T (stopped) per /proc/<pid>/task/*/stat.
bool AllThreadsStopped(pid_t pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    const std::string stat = test_support::ReadFileIfExists(task.path() / "stat");
    const std::size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) continue;  // thread just exited
    if (stat[paren + 2] != 'T' && stat[paren + 2] != 't') return false;
    any = true;
  }
  return !ec && any;
}

}  // namespace

bool ChildProcess::Pause(std::chrono::milliseconds timeout) {
  if (::kill(pid_, SIGSTOP) != 0) return false;
  return test_support::Eventually([this] { return AllThreadsStopped(pid_); }, timeout);
}

int RunCommand(const std::vector<std::string>& argv, const std::filesystem::path& log_path,
               const RunAs* run_as) {
  const pid_t pid = Spawn(argv, log_path, run_as);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

EtcdctlLock::EtcdctlLock(const std::string& etcdctl_path, const std::string& endpoints,
                         const std::string& name, const std::filesystem::path& dir)
    : release(dir / "release"), log(dir / "etcdctl.log") {
  ::setenv("ETCDCTL_API", "3", 1);
  const std::string script =
      "echo \"held rev=$ETCD_LOCK_REV key=$ETCD_LOCK_KEY\"; i=0; "
      "while [ ! -f '" +
      release.string() +
      "' ] && [ $i -lt 1200 ]; do sleep 0.05; "
      "i=$((i+1)); done; echo released";
  process = std::make_unique<ChildProcess>(
      std::vector<std::string>{etcdctl_path, "--endpoints=" + endpoints, "lock", name, "--",
                               "/bin/sh", "-c", script},
      log);
}

bool EtcdctlLock::Holds() const {
  return test_support::ReadFileIfExists(log).find("held rev=") != std::string::npos;
}

std::int64_t EtcdctlLock::Rev() const {
  const std::string text = test_support::ReadFileIfExists(log);
  const auto at = text.find("held rev=");
  return at == std::string::npos ? -1 : std::stoll(text.substr(at + 9));
}

std::string EtcdctlLock::Key() const {
  const std::string text = test_support::ReadFileIfExists(log);
  const auto at = text.find(" key=");
  if (at == std::string::npos) return {};
  return text.substr(at + 5, text.find('\n', at) - at - 5);
}

void EtcdctlLock::Release() const { test_support::WriteFile(release, "go"); }

}  // namespace epoch::client::testing
