// watch: prints events until interrupted (SIGINT/SIGTERM) or --max-events (for scripts/tests).
#include <fmt/format.h>

#include "commands.h"
#include "epoch/etcd_errors.h"
#include "fields_output.h"
#include "go_json.h"
#include "output.h"

namespace epoch::ctl {
namespace {

// clientv3.WatchResponse through encoding/json: the header by value, the exported fields named
// as in Go and never omitted.
std::string WatchJson(const etcdserverpb::WatchResponse& r) {
  std::string events = r.events_size() == 0 ? "null" : "[";
  for (const auto& event : r.events()) events += (events.size() > 1 ? "," : "") + GoJson(event);
  if (r.events_size() > 0) events += "]";
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
};

void PrintEvent(std::ostream& out, const mvccpb::Event& event) {
  out << (event.type() == mvccpb::Event::PUT ? "PUT" : "DELETE") << "\n";
  if (event.has_prev_kv()) out << event.prev_kv().key() << "\n" << event.prev_kv().value() << "\n";
  out << event.kv().key() << "\n" << event.kv().value() << "\n";
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
  etcdserverpb::WatchCreateRequest create;
  create.set_key(f.key);
  create.set_range_end(f.prefix ? client::PrefixRangeEnd(f.key) : f.range_end);
  if (f.prefix && f.key.empty()) create.set_key(std::string(1, '\0'));
  create.set_start_revision(f.rev);
  create.set_prev_kv(f.prev_kv);
  EPOCH_RETURN_IF_ERROR((*stream)->Create(create));
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
    if (ctl.format() == OutputFormat::kJson) {
      ctl.out() << WatchJson(*response) << "\n";
      seen += response->events_size();
    } else if (ctl.format() == OutputFormat::kFields) {
      ctl.out() << FieldsOf(*response);
      seen += response->events_size();
    } else if (ctl.format() == OutputFormat::kProtobuf) {
      ctl.out() << response->SerializeAsString();
      seen += response->events_size();
    } else {
      for (const auto& event : response->events()) {
        PrintEvent(ctl.out(), event);
        if (++seen == f.max_events) break;
      }
    }
    ctl.out().flush();
  }
  return Status::Ok();
}

}  // namespace

void RegisterWatchCommand(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<WatchFlags>();
  CLI::App* cmd = app.add_subcommand("watch", "Watches events stream on keys or prefixes");
  cmd->add_option("key", f->key, "Key (or start of the range)")->required();
  cmd->add_option("range_end", f->range_end, "End of the range [key, range_end)");
  cmd->add_flag("--prefix", f->prefix, "Watch on a prefix if prefix is set");
  cmd->add_option("--rev", f->rev, "Revision to start watching");
  cmd->add_flag("--prev-kv", f->prev_kv,
                "Get the previous key-value pair before the event happens");
  cmd->add_option("--max-events", f->max_events,
                  "Exit after this many events (0: until interrupted)");
  cmd->callback(Runner(ctl, [&ctl, f] { return RunWatch(ctl, *f); }));
}

}  // namespace epoch::ctl
