// watch: prints events until interrupted (SIGINT/SIGTERM) or --max-events (for scripts/tests).
// watch -i: etcdctl 3.4's interactive mode: each stdin line `watch [flags] key [range_end]` adds a
// watch on one shared stream (watch_parse.h); a reader thread prints the events of all of them as
// they come; end of input ends the command as etcdctl does (exit 3).
// Both run the command given after "--" once per event, after printing the response, with
// etcdctl's ETCD_WATCH_* variables; a command that fails (cannot start, non-zero exit, signal)
// ends epochctl with etcdctl's `command [...] error (...)` line and exit status 1.
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "commands.h"
#include "epoch/etcd_errors.h"
#include "fields_output.h"
#include "go_json.h"
#include "output.h"
#include "watch_parse.h"

namespace epoch::ctl {
namespace {

// clientv3.WatchResponse through encoding/json: the header by value, the exported fields named
// as in Go and never omitted (Events is never nil: clientv3 makes the slice for every response).
std::string WatchJson(const etcdserverpb::WatchResponse& r) {
  std::string events = "[";
  for (const auto& event : r.events()) events += (events.size() > 1 ? "," : "") + GoJson(event);
  events += "]";
  return GoJsonObject()
      .Raw("Header", GoJson(r.header()))
      .Raw("Events", events)
      .Int("CompactRevision", r.compact_revision())
      .Bool("Canceled", r.canceled())
      .Bool("Created", r.created())
      .Close();
}

extern "C" char** environ;  // NOLINT: POSIX declares it nowhere else

struct WatchFlags {
  std::vector<std::string> args;  // key, range_end and the command's words, as parsed
  std::string unused_command;
  bool prefix = false;
  std::int64_t rev = 0;
  bool prev_kv = false;
  std::int64_t max_events = 0;
  bool interactive = false;
};

void PrintEvent(std::ostream& out, const mvccpb::Event& event) {
  out << (event.type() == mvccpb::Event::PUT ? "PUT" : "DELETE") << "\n";
  if (event.has_prev_kv()) out << event.prev_kv().key() << "\n" << event.prev_kv().value() << "\n";
  out << event.kv().key() << "\n" << event.kv().value() << "\n";
}

// Prints one response in the chosen format and returns how many events it printed: all of them,
// except in simple (and table, which prints as simple) where it stops after `limit` (0: no limit).
std::int64_t PrintResponse(Ctl& ctl, const etcdserverpb::WatchResponse& r, std::int64_t limit) {
  std::int64_t printed = 0;
  switch (ctl.format()) {
    case OutputFormat::kJson: ctl.out() << WatchJson(r) << "\n"; return r.events_size();
    case OutputFormat::kFields: ctl.out() << FieldsOf(r); return r.events_size();
    case OutputFormat::kProtobuf: ctl.out() << r.SerializeAsString(); return r.events_size();
    case OutputFormat::kSimple:
    case OutputFormat::kTable:
      for (const auto& event : r.events()) {
        PrintEvent(ctl.out(), event);
        if (++printed == limit) break;
      }
      break;
  }
  return printed;
}

// Go's text for an errno (syscall.Errno.Error): strerror's words, lower case first.
std::string GoErrnoText(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// Go's exec.LookPath for a bare name (etcdctl's exec.Command looks up names without a slash).
Result<std::string> LookPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path == nullptr ? "" : path;
  while (true) {
    const std::size_t colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & 0111) != 0) {
      return candidate;
    }
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return Status::NotFound(
      fmt::format("exec: {}: executable file not found in $PATH", GoQuote(name)));
}

// The command etcdctl runs for each event of a watch (`watch KEY -- CMD ARGS...`).
class EventCommand {
 public:
  EventCommand(std::vector<std::string> argv, std::stop_token stop)
      : argv_(std::move(argv)), stop_(std::move(stop)) {}

  [[nodiscard]] bool empty() const { return argv_.empty(); }

  // Runs the command for `event` of a response at `revision` and waits for it; the stop request
  // kills it (etcdctl's exec.CommandContext). An error carries Go's words for the failure.
  Status Run(std::int64_t revision, const mvccpb::Event& event) const {
    Result<std::string> path = LookPath(argv_[0]);
    if (!path.ok()) return path.status();
    // The environment, with etcdctl's variables replacing any inherited ones (Go's exec keeps the
    // last of duplicates).
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view entry(*e);
      const auto is = [&entry](std::string_view name) { return entry.starts_with(name); };
      if (is("ETCD_WATCH_REVISION=") || is("ETCD_WATCH_EVENT_TYPE=") || is("ETCD_WATCH_KEY=") ||
          is("ETCD_WATCH_VALUE=")) {
        continue;
      }
      env.emplace_back(*e);
    }
    env.push_back(fmt::format("ETCD_WATCH_REVISION={}", revision));
    env.push_back("ETCD_WATCH_EVENT_TYPE=" +
                  GoQuote(event.type() == mvccpb::Event::PUT ? "PUT" : "DELETE"));
    env.push_back("ETCD_WATCH_KEY=" + GoQuote(event.kv().key()));
    env.push_back("ETCD_WATCH_VALUE=" + GoQuote(event.kv().value()));
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv_;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    // The child starts with no signal blocked (main blocks SIGINT/SIGTERM for its sigwait thread).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = 0;
    const int spawned = posix_spawn(&pid, path->c_str(), nullptr, &attr, argv.data(), envp.data());
    posix_spawnattr_destroy(&attr);
    if (spawned != 0) {
      return Status::Aborted(fmt::format("fork/exec {}: {}", *path, GoErrnoText(spawned)));
    }
    return Wait(pid);
  }

  // etcdctl's line for a failed command: `command ["echo" "hi"] error (<why>)`.
  [[nodiscard]] std::string FailureLine(const Status& status) const {
    std::string words;
    for (const std::string& word : argv_) words += (words.empty() ? "" : " ") + GoQuote(word);
    return fmt::format("command [{}] error ({})", words, status.message());
  }

 private:
  // Polls every 5 ms: bounded by the child's life (SIGKILLed once stop is requested).
  Status Wait(pid_t pid) const {
    bool killed = false;
    while (true) {
      int status = 0;
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done < 0 && errno == EINTR) continue;
      if (done < 0) return Status::Aborted(fmt::format("wait: {}", GoErrnoText(errno)));
      if (done == pid) {
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
        if (WIFEXITED(status)) {
          return Status::Aborted(fmt::format("exit status {}", WEXITSTATUS(status)));
        }
        return Status::Aborted(fmt::format("signal: {}", GoSignalText(WTERMSIG(status))));
      }
      if (!killed && stop_.stop_requested()) {
        kill(pid, SIGKILL);
        killed = true;
      }
      std::mutex mu;
      std::condition_variable_any cv;
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::milliseconds(5), [] { return false; });
    }
  }

  // Go's signal text (syscall.Signal.String): strsignal's words, lower case first.
  static std::string GoSignalText(int signal) {
    std::string text = strsignal(signal);
    if (!text.empty()) {
      text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
    }
    return text;
  }

  std::vector<std::string> argv_;
  std::stop_token stop_;
};

// Runs `command` for each of the first `count` events of `r` (what was printed); the failure as
// etcdctl reports it, already written to stderr, or Ok.
Status RunEventCommands(Ctl& ctl, const EventCommand& command, const etcdserverpb::WatchResponse& r,
                        std::int64_t count) {
  if (command.empty()) return Status::Ok();
  ctl.out().flush();  // the child writes to the same stdout, after the printed events
  for (std::int64_t i = 0; i < count && i < r.events_size(); ++i) {
    if (ctl.stop().stop_requested()) return Status::Ok();
    Status ran = command.Run(r.header().revision(), r.events(static_cast<int>(i)));
    if (!ran.ok()) {
      if (ctl.stop().stop_requested()) return Status::Ok();  // killed by the interrupt
      std::cerr << command.FailureLine(ran) << "\n";
      std::cerr.flush();
      return ran;
    }
  }
  return Status::Ok();
}

etcdserverpb::WatchCreateRequest CreateRequest(const std::string& key, const std::string& range_end,
                                               bool prefix, std::int64_t rev, bool prev_kv) {
  etcdserverpb::WatchCreateRequest create;
  create.set_key(key);
  create.set_range_end(prefix ? client::PrefixRangeEnd(key) : range_end);
  if (prefix && key.empty()) create.set_key(std::string(1, '\0'));
  create.set_start_revision(rev);
  create.set_prev_kv(prev_kv);
  return create;
}

// Returns the outcome; a failed event command was reported already and sets *command_failed.
Status RunWatch(Ctl& ctl, const WatchFlags& f, const WatchLine& w, bool* command_failed) {
  if (f.max_events < 0 || f.rev < 0) {
    return Status::InvalidArgument("--rev and --max-events must not be negative");
  }
  const EventCommand command(w.command, ctl.stop());
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<std::unique_ptr<client::WatchStream>> stream = (*client)->OpenWatch(ctl.stop());
  if (!stream.ok()) return stream.status();
  EPOCH_RETURN_IF_ERROR(
      (*stream)->Create(CreateRequest(w.key, w.range_end, f.prefix, f.rev, f.prev_kv)));
  std::int64_t seen = 0;
  // Bounded by the stream: it ends on interrupt (the stop token cancels it) or server end.
  while (f.max_events == 0 || seen < f.max_events) {
    Result<etcdserverpb::WatchResponse> response = (*stream)->Receive();
    if (!response.ok()) {
      if (ctl.stop().stop_requested()) return Status::Ok();  // interrupted: a normal end
      return response.status();
    }
    if (response->compact_revision() != 0) {
      return etcd_errors::kCompacted.ToStatus(
          fmt::format("compact revision {}", response->compact_revision()));
    }
    if (response->canceled()) {
      return Status::Unavailable("watch canceled: " + (response->cancel_reason().empty()
                                                           ? std::string("by the server")
                                                           : response->cancel_reason()));
    }
    if (response->events_size() == 0) continue;  // created / progress
    const std::int64_t printed =
        PrintResponse(ctl, *response, f.max_events == 0 ? 0 : f.max_events - seen);
    seen += printed;
    ctl.out().flush();
    Status ran = RunEventCommands(ctl, command, *response, printed);
    if (!ran.ok()) {
      *command_failed = true;
      return ran;
    }
  }
  return Status::Ok();
}

// The text clientv3's WatchResponse.Err() gives a cancelled watch, which etcdctl prints as
// "watch was canceled (<text>)".
std::string CancelText(const etcdserverpb::WatchResponse& r) {
  if (r.compact_revision() != 0) return std::string(etcd_errors::kCompacted.message);
  if (r.cancel_reason().empty()) return std::string(etcd_errors::kFutureRev.message);
  if (r.cancel_reason().starts_with(etcd_errors::kMessagePrefix)) return r.cancel_reason();
  return "rpc error: code = FailedPrecondition desc = " + r.cancel_reason();
}

// `watch -i`: the stdin loop on the calling thread, the stream's reader on its own.
class InteractiveWatch {
 public:
  InteractiveWatch(Ctl& ctl, WatchEnv env) : ctl_(ctl), env_(std::move(env)) {}
  ~InteractiveWatch() { CloseStream(); }
  InteractiveWatch(const InteractiveWatch&) = delete;
  InteractiveWatch& operator=(const InteractiveWatch&) = delete;

  // Whether a watch's command failed (its line is on stderr; the command exits 1 silently).
  [[nodiscard]] bool command_failed() const { return command_failed_.load(); }

  // Reads lines until end of input, an interrupt, a line etcdctl exits on or a failed event
  // command; returns the status and the exit code to end with.
  std::pair<Status, int> Run() {
    std::string buffer;
    char chunk[4096];
    while (true) {
      const std::size_t newline = buffer.find('\n');
      if (newline != std::string::npos) {
        const std::string line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        Result<bool> go_on = HandleLine(line);
        if (command_failed_.load()) return {Status::Ok(), 0};
        if (!go_on.ok()) return {go_on.status(), 1};
        if (!*go_on) return {Status::InvalidArgument(fatal_), kExitBadArgs};
        continue;
      }
      // Wait for input in short slices so that an interrupt ends the loop.
      pollfd in{STDIN_FILENO, POLLIN, 0};
      const int ready = poll(&in, 1, 100);
      if (ctl_.stop().stop_requested() || command_failed_.load()) return {Status::Ok(), 0};
      if (ready <= 0) continue;
      const ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        // etcdctl's bufio ReadString: a last line without a newline is read with the error and
        // dropped.
        return {Status::InvalidArgument(n == 0 ? "Error reading watch request line: EOF"
                                               : fmt::format("Error reading watch request line: "
                                                             "read /dev/stdin: {}",
                                                             std::strerror(errno))),
                kExitInvalidInput};
      }
      buffer.append(chunk, static_cast<std::size_t>(n));
    }
  }

 private:
  // Returns false when the line ends the command (fatal_ holds the reason), an error when the
  // stream cannot be opened or written.
  Result<bool> HandleLine(const std::string& line) {
    const WatchLine parsed = ParseWatchLine(line, env_);
    switch (parsed.kind) {
      case WatchLine::Kind::kFatal: fatal_ = parsed.message; return false;
      case WatchLine::Kind::kInvalid: {
        std::lock_guard lock(out_mu_);
        std::cerr << parsed.message << "\n";
        std::cerr.flush();
        return true;
      }
      case WatchLine::Kind::kProgress:
      case WatchLine::Kind::kWatch: break;
    }
    Result<client::WatchStream*> stream = Stream();
    if (!stream.ok()) return stream.status();
    if (parsed.kind == WatchLine::Kind::kProgress) {
      EPOCH_RETURN_IF_ERROR((*stream)->RequestProgress());
      return true;
    }
    active_.fetch_add(1);
    {
      // Bound to the watch ID when the create's reply comes (replies come in request order).
      std::lock_guard lock(out_mu_);
      pending_commands_.push_back(parsed.command);
    }
    EPOCH_RETURN_IF_ERROR((*stream)->Create(
        CreateRequest(parsed.key, parsed.range_end, parsed.prefix, parsed.rev, parsed.prev_kv)));
    return true;
  }

  // The shared stream, opened again after it failed (its watches were reported cancelled).
  Result<client::WatchStream*> Stream() {
    if (stream_ != nullptr && !stream_failed_.load()) return stream_.get();
    CloseStream();
    Result<client::Client*> client = ctl_.GetClient();
    if (!client.ok()) return client.status();
    Result<std::unique_ptr<client::WatchStream>> stream = (*client)->OpenWatch(ctl_.stop());
    if (!stream.ok()) return stream.status();
    stream_ = std::move(*stream);
    stream_failed_.store(false);
    reader_ = std::thread([this] { ReadEvents(); });
    return stream_.get();
  }

  // Ends the stream and its reader without a word (etcdctl exits without reporting its watches).
  void CloseStream() {
    if (stream_ == nullptr) return;
    closing_.store(true);
    stream_->Cancel();
    if (reader_.joinable()) reader_.join();
    stream_.reset();
    closing_.store(false);
    pending_commands_.clear();
    commands_.clear();
  }

  // The reader thread: prints what clientv3 delivers to etcdctl's watch channels, as etcdctl's
  // printWatchCh does: events, cancellations (with a line on stderr) and progress notifications
  // (with a line on stdout; one answering a `progress` line goes to every watch), not `created`
  // replies. After printing a response it runs its watch's command for each event.
  void ReadEvents() {
    while (true) {
      Result<etcdserverpb::WatchResponse> response = stream_->Receive();
      std::unique_lock lock(out_mu_);
      if (!response.ok()) {
        stream_failed_.store(true);
        if (closing_.load() || ctl_.stop().stop_requested()) return;
        // Every watch of the stream ends, each with its line, as clientv3 closes their channels.
        for (int i = active_.exchange(0); i > 0; --i) {
          std::cerr << fmt::format("watch was canceled ({})\n", ErrorLine(response.status()));
        }
        std::cerr.flush();
        return;
      }
      if (response->created() && !pending_commands_.empty()) {
        commands_[response->watch_id()] = std::move(pending_commands_.front());
        pending_commands_.pop_front();
      }
      if (response->created() && !response->canceled()) continue;
      int copies = 1;
      if (response->canceled() || response->compact_revision() != 0) {
        active_.fetch_sub(1);
        std::cerr << fmt::format("watch was canceled ({})\n", CancelText(*response));
        std::cerr.flush();
      } else if (response->events_size() == 0) {
        if (response->header().revision() == 0) continue;
        // A progress notification; watch ID -1 answers the stream's request: each watch's.
        copies = response->watch_id() == -1 ? active_.load() : 1;
      }
      for (int i = 0; i < copies; ++i) {
        if (response->events_size() == 0 && !response->canceled() &&
            response->compact_revision() == 0) {
          ctl_.out() << fmt::format("progress notify: {}\n", response->header().revision());
        }
        PrintResponse(ctl_, *response, 0);
      }
      ctl_.out().flush();
      const auto command = commands_.find(response->watch_id());
      if (command == commands_.end() || command->second.empty() || response->events_size() == 0) {
        continue;
      }
      const EventCommand run(command->second, ctl_.stop());
      lock.unlock();  // stdin's refusals may print while the command runs
      if (!RunEventCommands(ctl_, run, *response, response->events_size()).ok()) {
        command_failed_.store(true);
        return;
      }
    }
  }

  Ctl& ctl_;
  const WatchEnv env_;
  std::mutex out_mu_;  // one writer at a time on stdout and stderr; guards the two below
  // The commands of the creates sent and not yet answered, in request order.
  std::deque<std::vector<std::string>> pending_commands_;
  // Each created watch's command (empty: none), by watch ID.
  std::map<std::int64_t, std::vector<std::string>> commands_;
  std::atomic<bool> command_failed_{false};  // set by the reader when a command failed
  std::unique_ptr<client::WatchStream> stream_;
  std::thread reader_;                      // reads stream_ until it ends
  std::atomic<bool> stream_failed_{false};  // set by the reader when stream_ ended
  std::atomic<int> active_{0};              // watches created on stream_ and not cancelled
  std::atomic<bool> closing_{false};        // CloseStream is ending stream_
  std::string fatal_;
};

// ETCDCTL_WATCH_KEY and ETCDCTL_WATCH_RANGE_END.
WatchEnv WatchEnvFromEnvironment() {
  WatchEnv env;
  if (const char* key = std::getenv("ETCDCTL_WATCH_KEY")) env.key = key;
  if (const char* end = std::getenv("ETCDCTL_WATCH_RANGE_END")) env.range_end = end;
  return env;
}

// The command line's words after its first "watch", as typed (etcdctl reads os.Args; the flag
// parser drops the "--" that starts the command).
std::vector<std::string> WordsAfterWatch() {
  std::ifstream file("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> words;
  bool after_watch = false;
  bool program = true;
  for (std::string word; std::getline(file, word, '\0');) {
    if (std::exchange(program, false)) continue;
    if (after_watch) {
      words.push_back(std::move(word));
    } else {
      after_watch = word == "watch";
    }
  }
  return words;
}

}  // namespace

void RegisterWatchCommand(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<WatchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "watch",
      "Watches events stream on keys or prefixes: watch [key or prefix] [range_end] [--] "
      "[exec-command arg1 arg2 ...]");
  cmd->add_option("args", f->args, "[key or prefix] [range_end]");
  // Never filled (`args` takes every positional word, those after "--" too: the command is read
  // from the command line as typed). Declared so that CLI11 accepts a "--" after the key: it
  // hands "--" to the parent command unless a positional still expects a value.
  cmd->add_option("exec-command", f->unused_command,
                  "After --: a command run for each event, with ETCD_WATCH_REVISION, "
                  "ETCD_WATCH_KEY, ETCD_WATCH_EVENT_TYPE, ETCD_WATCH_VALUE");
  cmd->add_flag("-i,--interactive", f->interactive,
                "Interactive mode: `watch [--prefix] [--rev N] [--prev-kv] key [range_end] [-- "
                "cmd...]` lines on stdin");
  cmd->add_flag("--prefix", f->prefix, "Watch on a prefix if prefix is set");
  cmd->add_option("--rev", f->rev, "Revision to start watching");
  cmd->add_flag("--prev-kv", f->prev_kv,
                "Get the previous key-value pair before the event happens");
  cmd->add_option("--max-events", f->max_events,
                  "Exit after this many events (0: until interrupted)");
  cmd->callback([&ctl, f] {
    Status status = ctl.Prepare();
    if (!status.ok()) return ctl.Finish(std::move(status));
    const WatchEnv env = WatchEnvFromEnvironment();
    status = CheckWatchEnv(env);
    if (!status.ok()) return ctl.Finish(std::move(status), kExitBadArgs);
    if (f->interactive) {
      InteractiveWatch watch(ctl, env);
      auto [outcome, exit_code] = watch.Run();
      if (watch.command_failed()) return ctl.ExitWith(1);
      return ctl.Finish(std::move(outcome), exit_code);
    }
    const WatchLine w = ParseWatchCommandLine(WordsAfterWatch(), f->args, f->prefix, env);
    if (w.kind != WatchLine::Kind::kWatch) {
      return ctl.Finish(Status::InvalidArgument(w.message), kExitBadArgs);
    }
    bool command_failed = false;
    status = RunWatch(ctl, *f, w, &command_failed);
    if (command_failed) return ctl.ExitWith(1);
    ctl.Finish(std::move(status));
  });
}

}  // namespace epoch::ctl
