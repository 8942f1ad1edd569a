// lock NAME [-- command args...]: etcd's lock recipe (epoch::client::Mutex) on a Session.
//
// Without a command: prints the lock key and holds the lock until interrupted (SIGINT/SIGTERM)
// or until the session is lost (then exits 1: the lock can no longer be trusted).
// With a command: runs it holding the lock, with EPOCH_FENCING_TOKEN (the key's create_revision),
// ETCD_LOCK_KEY and ETCD_LOCK_REV (the acquisition's header revision, as etcdctl) in its
// environment; epochctl exits with the command's exit status (128+N when killed by signal N).
// When the session is lost (or epochctl is interrupted) the command is sent SIGTERM, then
// SIGKILL after --kill-grace; a lost session is reported on stderr.
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>

#include "commands.h"
#include "epoch/client/mutex.h"
#include "epoch/client/session.h"

namespace epoch::ctl {
namespace {

using Clock = std::chrono::steady_clock;

struct LockFlags {
  std::string name;
  std::vector<std::string> command;
  std::int64_t ttl_s = 10;
  std::string kill_grace = "5s";
};

void WaitFor(std::chrono::milliseconds d, const std::stop_token& a) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, a, d, [] { return false; });
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

pid_t Spawn(const std::vector<std::string>& command, const std::vector<std::string>& env) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // main blocked SIGINT/SIGTERM for its signal thread
  for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
  std::vector<char*> argv;
  for (const std::string& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  fmt::print(stderr, "Error: cannot run {}: {}\n", command[0], std::strerror(errno));
  _exit(127);
}

// Waits for the child; stops it (SIGTERM, then SIGKILL after `grace`) once `abort` is requested.
// Returns the wait status. Polls every 10 ms: bounded by the child's life plus `grace`.
int Supervise(pid_t pid, const std::stop_token& lost, const std::stop_token& interrupted,
              std::chrono::milliseconds grace) {
  std::optional<Clock::time_point> term_sent;
  bool killed = false;
  while (true) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return done == pid ? status : 1 << 8;
    if (!term_sent && (lost.stop_requested() || interrupted.stop_requested())) {
      kill(pid, SIGTERM);
      term_sent = Clock::now();
    }
    if (term_sent && !killed && Clock::now() - *term_sent >= grace) {
      kill(pid, SIGKILL);
      killed = true;
    }
    WaitFor(std::chrono::milliseconds(10), std::stop_token());
  }
}

Status RunLock(Ctl& ctl, const LockFlags& f) {
  if (f.ttl_s <= 0) return Status::InvalidArgument("--ttl must be positive (seconds)");
  Result<std::chrono::milliseconds> grace = ParseDuration(f.kill_grace);
  if (!grace.ok()) return grace.status().Annotate("--kill-grace");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  client::SessionConfig config;
  config.timing.ttl = std::chrono::seconds(f.ttl_s);
  config.timing.poison_pill = false;
  Result<std::unique_ptr<client::Session>> session = client::Session::Create(*client, config);
  if (!session.ok()) return session.status();
  client::Mutex mutex(*client, **session, f.name);
  client::LockOptions options;
  options.stop = ctl.stop();
  Result<FencingToken> token = mutex.Lock(options);
  if (!token.ok()) {
    (void)(*session)->Close();
    return ctl.stop().stop_requested() ? Status::Aborted("interrupted while waiting for the lock")
                                       : token.status();
  }
  const std::stop_token lost = (*session)->stop_token();
  const std::int64_t lock_rev = mutex.header().revision();
  if (f.command.empty()) {
    ctl.out() << mutex.key() << "\n" << std::flush;
    std::stop_source either;
    std::stop_callback on_lost(lost, [&either] { either.request_stop(); });
    std::stop_callback on_interrupt(ctl.stop(), [&either] { either.request_stop(); });
    WaitFor(std::chrono::hours(24 * 365 * 10), either.get_token());
  } else {
    const std::vector<std::string> env = {fmt::format("EPOCH_FENCING_TOKEN={}", token->value()),
                                          fmt::format("ETCD_LOCK_KEY={}", mutex.key()),
                                          fmt::format("ETCD_LOCK_REV={}", lock_rev)};
    const pid_t pid = Spawn(f.command, env);
    if (pid < 0) return Status::IOError(fmt::format("fork: {}", std::strerror(errno)));
    const int wait_status = Supervise(pid, lost, ctl.stop(), *grace);
    const bool was_lost = lost.stop_requested() && !ctl.stop().stop_requested();
    if (!was_lost) (void)mutex.Unlock();
    (void)(*session)->Close();
    const int code = ExitCodeOf(wait_status);
    if (was_lost) {
      ctl.Finish(Status::Aborted(
                     fmt::format("lock {} lost: session expired; command stopped (exit status {})",
                                 mutex.key(), code)),
                 code == 0 ? 1 : code);
      return Status::Ok();
    }
    ctl.ExitWith(code);
    return Status::Ok();
  }
  if (lost.stop_requested() && !ctl.stop().stop_requested()) {
    return Status::Aborted(fmt::format("lock {} lost: session expired", mutex.key()));
  }
  (void)mutex.Unlock();
  return (*session)->Close();
}

}  // namespace

void RegisterLockCommand(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<LockFlags>();
  CLI::App* cmd = app.add_subcommand(
      "lock", "Acquires a named lock (and runs a command holding it: lock NAME -- cmd args)");
  cmd->add_option("name", f->name, "Lock name")->required();
  cmd->add_option("command", f->command, "Command to run while holding the lock");
  cmd->add_option("--ttl", f->ttl_s, "Timeout for the session (seconds)");
  cmd->add_option("--kill-grace", f->kill_grace,
                  "Time between SIGTERM and SIGKILL of the command when the lock is lost");
  cmd->callback(Runner(ctl, [&ctl, f] { return RunLock(ctl, *f); }));
}

}  // namespace epoch::ctl
