// elect NAME PROPOSAL: campaign (etcd's election recipe, epoch::client::Election) and hold
// leadership until interrupted, --hold elapses, or the session is lost; then resign.
// elect -l NAME: observe, printing every new leader value (until interrupted or --max-events).
#include <fmt/format.h>

#include <condition_variable>
#include <mutex>

#include "commands.h"
#include "epoch/client/election.h"
#include "epoch/client/session.h"
#include "go_json.h"
#include "output.h"

namespace epoch::ctl {
namespace {

struct ElectFlags {
  std::string name;
  std::string proposal;
  bool listen = false;
  std::int64_t ttl_s = 60;
  std::string hold = "0s";
  std::int64_t max_events = 0;
};

void PrintLeader(Ctl& ctl, const mvccpb::KeyValue& kv) {
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << GoJson(kv) << "\n";
  } else {
    ctl.out() << kv.key() << "\n" << kv.value() << "\n";
  }
  ctl.out().flush();
}

// Prints the leader whenever it changes: a first-create Range, then a watch on the prefix; any
// event re-reads the leader. Ends on interrupt, --max-events, or a broken watch (error).
Status Observe(Ctl& ctl, client::Client& client, const ElectFlags& f) {
  client::Election election(&client, LeaseId(0), f.name);
  std::string last_key, last_value;
  std::int64_t printed = 0;
  auto report = [&]() -> Result<std::int64_t> {
    Result<client::Election::LeaderInfo> leader = election.Leader(ctl.Call());
    if (!leader.ok()) return leader.status();
    if (leader->kv && (leader->kv->key() != last_key || leader->kv->value() != last_value)) {
      last_key = leader->kv->key();
      last_value = leader->kv->value();
      PrintLeader(ctl, *leader->kv);
      ++printed;
    }
    return leader->revision;
  };
  Result<std::int64_t> revision = report();
  if (!revision.ok()) return revision.status();
  Result<std::unique_ptr<client::WatchStream>> stream = client.OpenWatch(ctl.stop());
  if (!stream.ok()) return stream.status();
  etcdserverpb::WatchCreateRequest create;
  create.set_key(f.name + "/");
  create.set_range_end(client::PrefixRangeEnd(f.name + "/"));
  create.set_start_revision(*revision + 1);
  EPOCH_RETURN_IF_ERROR((*stream)->Create(create));
  while (f.max_events == 0 || printed < f.max_events) {
    Result<etcdserverpb::WatchResponse> response = (*stream)->Receive();
    if (!response.ok()) return ctl.stop().stop_requested() ? Status::Ok() : response.status();
    if (response->canceled()) return Status::Unavailable("observe: watch canceled");
    if (response->events_size() == 0) continue;
    Result<std::int64_t> again = report();
    if (!again.ok()) return again.status();
  }
  return Status::Ok();
}

Status Campaign(Ctl& ctl, client::Client& client, const ElectFlags& f) {
  Result<std::chrono::milliseconds> hold = ParseDuration(f.hold);
  if (!hold.ok()) return hold.status().Annotate("--hold");
  if (f.ttl_s <= 0) return Status::InvalidArgument("--ttl must be positive (seconds)");
  client::SessionConfig config;
  config.timing.ttl = std::chrono::seconds(f.ttl_s);
  Result<std::unique_ptr<client::Session>> session = client::Session::Create(&client, config);
  if (!session.ok()) return session.status();
  client::Election election(&client, (*session)->lease(), f.name, (*session)->stop_token());
  Result<std::int64_t> rev = election.Campaign(f.proposal, ctl.CallWithoutTimeout());
  if (!rev.ok()) {
    (void)(*session)->Close();
    return ctl.stop().stop_requested() ? Status::Aborted("interrupted while campaigning")
                                       : rev.status();
  }
  mvccpb::KeyValue kv;
  kv.set_key(election.key());
  kv.set_value(f.proposal);
  kv.set_create_revision(*rev);
  kv.set_lease((*session)->lease().value());
  PrintLeader(ctl, kv);
  std::stop_source either;
  const std::stop_token lost = (*session)->stop_token();
  std::stop_callback on_lost(lost, [&either] { either.request_stop(); });
  std::stop_callback on_interrupt(ctl.stop(), [&either] { either.request_stop(); });
  const auto wait =
      hold->count() > 0 ? *hold : std::chrono::milliseconds(std::chrono::hours(24 * 3650));
  {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, either.get_token(), wait, [] { return false; });
  }
  if (lost.stop_requested() && !ctl.stop().stop_requested()) {
    return Status::Aborted("election " + f.name + ": session expired, leadership lost");
  }
  client::CallOptions call;
  call.timeout = ctl.CommandTimeout().value();
  EPOCH_RETURN_IF_ERROR(election.Resign(call));
  return (*session)->Close();
}

}  // namespace

void RegisterElectCommand(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<ElectFlags>();
  CLI::App* cmd = app.add_subcommand("elect", "Observes and participates in leader election");
  cmd->add_option("name", f->name, "Election name")->required();
  cmd->add_option("proposal", f->proposal, "Value to campaign with");
  cmd->add_flag("-l,--listen", f->listen, "Observation mode");
  cmd->add_option("--ttl", f->ttl_s, "Timeout for the session (seconds)");
  cmd->add_option("--hold", f->hold, "Resign after leading this long (0: until interrupted)");
  cmd->add_option("--max-events", f->max_events,
                  "With -l: exit after printing this many leaders (0: until interrupted)");
  cmd->callback(Runner(ctl, [&ctl, f, cmd]() -> Status {
    Result<client::Client*> client = ctl.GetClient();
    if (!client.ok()) return client.status();
    if (f->listen) return Observe(ctl, **client, *f);
    if (cmd->count("proposal") == 0) return Status::InvalidArgument("no proposal argument given");
    return Campaign(ctl, **client, *f);
  }));
}

}  // namespace epoch::ctl
