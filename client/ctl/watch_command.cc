// watch: prints events until interrupted (SIGINT/SIGTERM) or --max-events (for scripts/tests).
// watch -i: etcdctl 3.4's interactive mode: each stdin line `watch [flags] key [range_end]` adds a
// watch on one shared stream (watch_parse.h); a reader thread prints the events of all of them as
// they come; end of input ends the command as etcdctl does (exit 3).
#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <mutex>
#include <thread>

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

struct WatchFlags {
  std::string key;
  std::string range_end;
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

Status RunWatch(Ctl& ctl, const WatchFlags& f) {
  if (f.prefix && !f.range_end.empty()) {
    return Status::InvalidArgument("too many arguments: range_end with --prefix");
  }
  if (f.max_events < 0 || f.rev < 0) {
    return Status::InvalidArgument("--rev and --max-events must not be negative");
  }
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<std::unique_ptr<client::WatchStream>> stream = (*client)->OpenWatch(ctl.stop());
  if (!stream.ok()) return stream.status();
  EPOCH_RETURN_IF_ERROR(
      (*stream)->Create(CreateRequest(f.key, f.range_end, f.prefix, f.rev, f.prev_kv)));
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
    seen += PrintResponse(ctl, *response, f.max_events == 0 ? 0 : f.max_events - seen);
    ctl.out().flush();
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
  explicit InteractiveWatch(Ctl& ctl) : ctl_(ctl) {}
  ~InteractiveWatch() { CloseStream(); }
  InteractiveWatch(const InteractiveWatch&) = delete;
  InteractiveWatch& operator=(const InteractiveWatch&) = delete;

  // Reads lines until end of input, an interrupt or a line etcdctl exits on; returns the status
  // and the exit code to end with.
  std::pair<Status, int> Run() {
    std::string buffer;
    char chunk[4096];
    while (true) {
      const std::size_t newline = buffer.find('\n');
      if (newline != std::string::npos) {
        const std::string line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        Result<bool> go_on = HandleLine(line);
        if (!go_on.ok()) return {go_on.status(), 1};
        if (!*go_on) return {Status::InvalidArgument(fatal_), kExitBadArgs};
        continue;
      }
      // Wait for input in short slices so that an interrupt ends the loop.
      pollfd in{STDIN_FILENO, POLLIN, 0};
      const int ready = poll(&in, 1, 100);
      if (ctl_.stop().stop_requested()) return {Status::Ok(), 0};
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
    const WatchLine parsed = ParseWatchLine(line);
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
  }

  // The reader thread: prints what clientv3 delivers to etcdctl's watch channels, as etcdctl's
  // printWatchCh does: events, cancellations (with a line on stderr) and progress notifications
  // (with a line on stdout; one answering a `progress` line goes to every watch), not `created`
  // replies.
  void ReadEvents() {
    while (true) {
      Result<etcdserverpb::WatchResponse> response = stream_->Receive();
      std::lock_guard lock(out_mu_);
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
    }
  }

  Ctl& ctl_;
  std::mutex out_mu_;  // one writer at a time on stdout and stderr
  std::unique_ptr<client::WatchStream> stream_;
  std::thread reader_;                      // reads stream_ until it ends
  std::atomic<bool> stream_failed_{false};  // set by the reader when stream_ ended
  std::atomic<int> active_{0};              // watches created on stream_ and not cancelled
  std::atomic<bool> closing_{false};        // CloseStream is ending stream_
  std::string fatal_;
};

}  // namespace

void RegisterWatchCommand(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<WatchFlags>();
  CLI::App* cmd = app.add_subcommand("watch", "Watches events stream on keys or prefixes");
  CLI::Option* key = cmd->add_option("key", f->key, "Key (or start of the range)");
  cmd->add_option("range_end", f->range_end, "End of the range [key, range_end)");
  cmd->add_flag("-i,--interactive", f->interactive,
                "Interactive mode: `watch [--prefix] [--rev N] [--prev-kv] key [range_end]` lines "
                "on stdin");
  cmd->add_flag("--prefix", f->prefix, "Watch on a prefix if prefix is set");
  cmd->add_option("--rev", f->rev, "Revision to start watching");
  cmd->add_flag("--prev-kv", f->prev_kv,
                "Get the previous key-value pair before the event happens");
  cmd->add_option("--max-events", f->max_events,
                  "Exit after this many events (0: until interrupted)");
  cmd->callback([&ctl, f, key] {
    Status status = ctl.Prepare();
    if (!status.ok()) return ctl.Finish(std::move(status));
    if (f->interactive) {
      InteractiveWatch watch(ctl);
      auto [outcome, exit_code] = watch.Run();
      return ctl.Finish(std::move(outcome), exit_code);
    }
    if (key->count() == 0) {
      return ctl.Finish(Status::InvalidArgument("bad number of arguments"), kExitBadArgs);
    }
    ctl.Finish(RunWatch(ctl, *f));
  });
}

}  // namespace epoch::ctl
