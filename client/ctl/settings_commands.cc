// cluster timing get / set: the cluster-wide timing (epoch.v1.Settings, docs/timing-and-safety.md
// §12). `get` asks the leader: the recorded timing, what the leader runs, and the election timeout
// each voter last reported, which shows how far a change has rolled out.
#include <fmt/format.h>

#include <optional>

#include "commands.h"
#include "epoch/client/admin.h"
#include "go_json.h"
#include "output.h"

namespace epoch::ctl {
namespace {

std::string Describe(const v1::TimingSettings& t) {
  return fmt::format("tick {} ms, heartbeat {} ms, election timeout {} ms, max clock drift {}",
                     t.tick_ms(), t.heartbeat_ms(), t.election_timeout_ms(), t.max_clock_drift());
}

Status PrintTiming(Ctl& ctl, const Result<v1::TimingResponse>& r) {
  if (!r.ok()) return r.status();
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << GoJson(*r) << "\n";
    return Status::Ok();
  }
  if (r->has_cluster()) {
    ctl.out() << fmt::format("cluster: {} (recorded at index {})\n", Describe(r->cluster()),
                             r->recorded_index());
  } else {
    ctl.out() << "cluster: not recorded yet (it is once the cluster first has a leader)\n";
  }
  ctl.out() << fmt::format("member {}: {}\n", MemberHex(r->header().member_id()),
                           Describe(r->member()));
  if (r->voters().empty()) return Status::Ok();
  std::vector<std::vector<std::string>> rows;
  for (const v1::MemberTiming& v : r->voters()) {
    rows.push_back({MemberHex(v.id()), v.election_timeout_ms() == 0
                                           ? std::string("not reported")
                                           : fmt::format("{} ms", v.election_timeout_ms())});
  }
  PrintTable(ctl.out(), {"VOTER", "ELECTION TIMEOUT"}, rows);
  return Status::Ok();
}

struct SetFlags {
  std::optional<std::int64_t> heartbeat_ms;
  std::optional<std::int64_t> election_timeout_ms;
  std::optional<double> max_clock_drift;
};

Status RunSet(Ctl& ctl, const SetFlags& f) {
  if (!f.heartbeat_ms && !f.election_timeout_ms && !f.max_clock_drift) {
    return Status::InvalidArgument(
        "nothing to set: give --heartbeat-interval, --election-timeout or --max-clock-drift");
  }
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  v1::SetTimingRequest request;
  if (f.heartbeat_ms) request.set_heartbeat_ms(*f.heartbeat_ms);
  if (f.election_timeout_ms) request.set_election_timeout_ms(*f.election_timeout_ms);
  if (f.max_clock_drift) request.set_max_clock_drift(*f.max_clock_drift);
  return PrintTiming(ctl, client::SetClusterTiming(**client, request, ctl.Call()));
}

}  // namespace

void RegisterSettingsCommands(CLI::App& app, Ctl& ctl) {
  CLI::App* cluster = app.add_subcommand("cluster", "Cluster-wide settings");
  cluster->require_subcommand(1);
  CLI::App* timing = cluster->add_subcommand(
      "timing", "The cluster's heartbeat interval, election timeout and clock drift bound");
  timing->require_subcommand(1);
  timing->add_subcommand("get", "Prints the recorded timing and each voter's election timeout")
      ->callback(Runner(ctl, [&ctl]() -> Status {
        Result<client::Client*> client = ctl.GetClient();
        if (!client.ok()) return client.status();
        return PrintTiming(ctl, client::ClusterTiming(**client, ctl.Call()));
      }));
  auto flags = std::make_shared<SetFlags>();
  CLI::App* set = timing->add_subcommand(
      "set", "Changes the timing: a logged change every member adopts as it applies it");
  set->add_option("--heartbeat-interval", flags->heartbeat_ms,
                  "Milliseconds between leader heartbeats (a multiple of the tick)");
  set->add_option("--election-timeout", flags->election_timeout_ms,
                  "Election timeout floor in milliseconds (a multiple of the tick, at least three "
                  "heartbeat intervals)");
  set->add_option("--max-clock-drift", flags->max_clock_drift,
                  "Bound on the clock rate difference between members (0.05 = 5%)");
  set->callback(Runner(ctl, [&ctl, flags] { return RunSet(ctl, *flags); }));
}

}  // namespace epoch::ctl
