// member list/add/remove/update/promote, endpoint status/health/hashkv, move-leader, alarm
// list/disarm, defrag.
#include <fmt/format.h>

#include <future>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "epoch/client/admin.h"
#include "go_json.h"
#include "machine_output.h"
#include "output.h"

namespace epoch::ctl {
namespace {

std::string Join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

Status RunMemberList(Ctl& ctl) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::MemberListResponse> r = (*client)->MemberList(ctl.Call());
  if (!r.ok()) return r.status();
  Result<bool> printed = PrintMachine(ctl, *r);
  if (!printed.ok()) return printed.status();
  if (*printed) return Status::Ok();
  std::vector<std::vector<std::string>> rows;
  for (const auto& m : r->members()) {
    rows.push_back({MemberHex(m.id()), m.name().empty() ? "unstarted" : "started", m.name(),
                    Join(m.peerurls()), Join(m.clienturls()), m.islearner() ? "true" : "false"});
  }
  if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(), {"ID", "STATUS", "NAME", "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER"},
               rows);
  } else {
    for (const auto& row : rows) {
      ctl.out() << fmt::format("{}, {}, {}, {}, {}, {}\n", row[0], row[1], row[2], row[3], row[4],
                               row[5]);
    }
  }
  return Status::Ok();
}

// --cluster: every member's client URLs instead of --endpoints.
Result<std::vector<std::string>> TargetEndpoints(Ctl& ctl, bool cluster) {
  if (!cluster) return ctl.Endpoints();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::MemberListResponse> r = (*client)->MemberList(ctl.Call());
  if (!r.ok()) return r.status();
  std::vector<std::string> endpoints;
  for (const auto& m : r->members()) {
    for (const std::string& url : m.clienturls()) endpoints.push_back(url);
  }
  if (endpoints.empty()) return Status::Unavailable("member list names no client URLs");
  return endpoints;
}

Status RunEndpointStatus(Ctl& ctl, bool cluster) {
  Result<std::vector<std::string>> endpoints = TargetEndpoints(ctl, cluster);
  if (!endpoints.ok()) return endpoints.status();
  Result<std::unique_ptr<client::Client>> client = ctl.ClientFor(*endpoints);
  if (!client.ok()) return client.status();
  std::vector<std::future<Result<etcdserverpb::StatusResponse>>> probes;
  for (std::size_t i = 0; i < endpoints->size(); ++i) {
    probes.push_back(
        std::async(std::launch::async, [&, i] { return (*client)->StatusOf(i, ctl.Call()); }));
  }
  std::vector<std::vector<std::string>> rows;
  std::string json = "[";
  std::vector<EndpointStatus> statuses;
  Status failed;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const std::string& ep = (*endpoints)[i];
    Result<etcdserverpb::StatusResponse> s = probes[i].get();
    if (!s.ok()) {
      std::cerr << fmt::format("Failed to get the status of endpoint {} ({})\n", ep,
                               ErrorLine(s.status()));
      if (failed.ok()) failed = s.status();
      continue;
    }
    std::string errors;
    for (const std::string& e : s->errors()) errors += (errors.empty() ? "" : ", ") + e;
    rows.push_back({ep, MemberHex(s->header().member_id()), s->version(), HumanBytes(s->dbsize()),
                    s->leader() == s->header().member_id() ? "true" : "false",
                    s->islearner() ? "true" : "false", std::to_string(s->raftterm()),
                    std::to_string(s->raftindex()), std::to_string(s->raftappliedindex()), errors});
    json += (json.size() > 1 ? "," : "") +
            GoJsonObject().String("Endpoint", ep).Raw("Status", GoJson(*s)).Close();
    statuses.push_back({ep, *s});
  }
  if (ctl.format() == OutputFormat::kProtobuf) return FormatUnsupported(ctl, "protobuf");
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << json << "]\n";
  } else if (ctl.format() == OutputFormat::kFields) {
    ctl.out() << FieldsOf(statuses);
  } else if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(),
               {"ENDPOINT", "ID", "VERSION", "DB SIZE", "IS LEADER", "IS LEARNER", "RAFT TERM",
                "RAFT INDEX", "RAFT APPLIED INDEX", "ERRORS"},
               rows);
  } else {
    for (const auto& row : rows) {
      std::string line;
      for (const std::string& cell : row) line += (line.empty() ? "" : ", ") + cell;
      ctl.out() << line << "\n";
    }
  }
  return failed;
}

// etcdctl's `endpoint hashkv`: Maintenance.HashKV of every endpoint, asked in parallel.
Status RunEndpointHashKV(Ctl& ctl, bool cluster, std::int64_t revision) {
  if (ctl.format() == OutputFormat::kProtobuf) return FormatUnsupported(ctl, "protobuf");
  Result<std::vector<std::string>> endpoints = TargetEndpoints(ctl, cluster);
  if (!endpoints.ok()) return endpoints.status();
  Result<std::unique_ptr<client::Client>> client = ctl.ClientFor(*endpoints);
  if (!client.ok()) return client.status();
  std::vector<std::future<Result<etcdserverpb::HashKVResponse>>> probes;
  for (std::size_t i = 0; i < endpoints->size(); ++i) {
    probes.push_back(std::async(std::launch::async,
                                [&, i] { return (*client)->HashKVOf(i, revision, ctl.Call()); }));
  }
  std::vector<EndpointHashKV> hashes;
  Status failed;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    Result<etcdserverpb::HashKVResponse> h = probes[i].get();
    if (!h.ok()) {
      std::cerr << fmt::format("Failed to get the hash of endpoint {} ({})\n", (*endpoints)[i],
                               ErrorLine(h.status()));
      if (failed.ok()) failed = h.status();
      continue;
    }
    hashes.push_back({(*endpoints)[i], *h});
  }
  std::string json = "[";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [ep, h] : hashes) {
    json += (json.size() > 1 ? "," : "") +
            GoJsonObject().String("Endpoint", ep).Raw("HashKV", GoJson(h)).Close();
    rows.push_back({ep, std::to_string(h.hash())});
  }
  switch (ctl.format()) {
    case OutputFormat::kJson: ctl.out() << json << "]\n"; break;
    case OutputFormat::kFields: ctl.out() << FieldsOf(hashes); break;
    case OutputFormat::kTable: PrintTable(ctl.out(), {"ENDPOINT", "HASH"}, rows); break;
    case OutputFormat::kSimple:
    case OutputFormat::kProtobuf:
      for (const auto& row : rows) ctl.out() << row[0] << ", " << row[1] << "\n";
      break;
  }
  return failed;
}

struct Health {
  std::string endpoint;
  bool healthy = false;
  std::chrono::nanoseconds took{0};
  std::string error;
};

// Like etcdctl: a linearizable Range of "health" per endpoint (quorum lost ⇒ fails within the
// command timeout), and no active alarm.
Health Probe(Ctl& ctl, const std::string& endpoint) {
  Health h;
  h.endpoint = endpoint;
  Result<std::unique_ptr<client::Client>> client = ctl.ClientFor({endpoint});
  if (!client.ok()) {
    h.error = ErrorLine(client.status());
    return h;
  }
  const auto start = std::chrono::steady_clock::now();
  etcdserverpb::RangeRequest range;
  range.set_key("health");
  Result<etcdserverpb::RangeResponse> r = (*client)->Range(range, ctl.Call());
  h.took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start);
  if (!r.ok()) {
    h.error = ErrorLine(r.status());
    return h;
  }
  Result<etcdserverpb::AlarmResponse> alarms =
      client::Alarm(**client, etcdserverpb::AlarmRequest(), ctl.Call());
  if (alarms.ok() && alarms->alarms_size() > 0) {
    h.error = "Active Alarm(s): " + etcdserverpb::AlarmType_Name(alarms->alarms(0).alarm());
    return h;
  }
  h.healthy = true;
  return h;
}

Status RunEndpointHealth(Ctl& ctl, bool cluster) {
  Result<std::vector<std::string>> endpoints = TargetEndpoints(ctl, cluster);
  if (!endpoints.ok()) return endpoints.status();
  std::vector<std::future<Health>> probes;
  for (const std::string& ep : *endpoints) {
    probes.push_back(std::async(std::launch::async, [&ctl, ep] { return Probe(ctl, ep); }));
  }
  if (ctl.format() == OutputFormat::kProtobuf) return FormatUnsupported(ctl, "protobuf");
  bool all = true;
  std::vector<std::vector<std::string>> rows;
  std::vector<EndpointHealth> healths;
  std::string json = "[";
  for (auto& probe : probes) {
    Health h = probe.get();
    all = all && h.healthy;
    const std::string took = GoDuration(h.took);
    rows.push_back({h.endpoint, h.healthy ? "true" : "false", took, h.error});
    GoJsonObject entry;
    entry.String("endpoint", h.endpoint).Bool("health", h.healthy).String("took", took);
    if (!h.error.empty()) entry.String("error", h.error);  // omitempty
    json += (json.size() > 1 ? "," : "") + entry.Close();
    healths.push_back({h.endpoint, h.healthy, took, h.error});
    if (ctl.format() == OutputFormat::kSimple) {
      if (h.healthy) {
        ctl.out() << fmt::format("{} is healthy: successfully committed proposal: took = {}\n",
                                 h.endpoint, took);
      } else {
        std::cerr << fmt::format("{} is unhealthy: failed to commit proposal: {}\n", h.endpoint,
                                 h.error);
      }
    }
  }
  if (ctl.format() == OutputFormat::kJson) ctl.out() << json << "]\n";
  if (ctl.format() == OutputFormat::kFields) ctl.out() << FieldsOf(healths);
  if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(), {"ENDPOINT", "HEALTH", "TOOK", "ERROR"}, rows);
  }
  return all ? Status::Ok() : Status::Unavailable("unhealthy cluster");
}

Status RunMoveLeader(Ctl& ctl, const std::string& target_hex) {
  Result<std::int64_t> target = ParseHexId(target_hex, "member");
  if (!target.ok()) return target.status();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<std::size_t> leader = (*client)->DiscoverLeader(ctl.Call());
  if (!leader.ok()) return leader.status();
  Result<etcdserverpb::StatusResponse> status = (*client)->StatusOf(*leader, ctl.Call());
  if (!status.ok()) return status.status();
  Result<etcdserverpb::MoveLeaderResponse> r =
      client::MoveLeader(**client, static_cast<std::uint64_t>(*target), ctl.Call());
  if (!r.ok()) return r.status();
  Result<bool> printed = PrintMachine(ctl, *r);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    ctl.out() << fmt::format("Leadership transferred from {} to {}\n",
                             MemberHex(status->header().member_id()), target_hex);
  }
  return Status::Ok();
}

// Alarms as etcdctl prints them (list and disarm share the display): JSON, a table, or one
// "memberID:<id> alarm:<type>" line each.
Status PrintAlarms(Ctl& ctl, const etcdserverpb::AlarmResponse& r) {
  Result<bool> printed = PrintMachine(ctl, r);
  if (!printed.ok()) return printed.status();
  if (*printed) return Status::Ok();
  std::vector<std::vector<std::string>> rows;
  for (const auto& alarm : r.alarms()) {
    rows.push_back({std::to_string(alarm.memberid()), etcdserverpb::AlarmType_Name(alarm.alarm())});
  }
  if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(), {"MEMBER ID", "ALARM"}, rows);
  } else {
    for (const auto& row : rows) ctl.out() << fmt::format("memberID:{} alarm:{}\n", row[0], row[1]);
  }
  return Status::Ok();
}

Status RunAlarmList(Ctl& ctl) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::AlarmRequest request;
  request.set_action(etcdserverpb::AlarmRequest::GET);
  Result<etcdserverpb::AlarmResponse> r = client::Alarm(**client, request, ctl.Call());
  if (!r.ok()) return r.status();
  return PrintAlarms(ctl, *r);
}

// etcdctl's `alarm disarm`: every active alarm is deactivated; the ones cleared are printed.
Status RunAlarmDisarm(Ctl& ctl) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::AlarmRequest list;
  list.set_action(etcdserverpb::AlarmRequest::GET);
  Result<etcdserverpb::AlarmResponse> active = client::Alarm(**client, list, ctl.Call());
  if (!active.ok()) return active.status();
  etcdserverpb::AlarmResponse cleared;
  for (const etcdserverpb::AlarmMember& alarm : active->alarms()) {
    etcdserverpb::AlarmRequest off;
    off.set_action(etcdserverpb::AlarmRequest::DEACTIVATE);
    off.set_memberid(alarm.memberid());
    off.set_alarm(alarm.alarm());
    Result<etcdserverpb::AlarmResponse> r = client::Alarm(**client, off, ctl.Call());
    if (!r.ok()) return r.status();
    for (const auto& a : r->alarms()) *cleared.add_alarms() = a;
    *cleared.mutable_header() = r->header();
  }
  return PrintAlarms(ctl, cleared);
}

// etcdctl's `defrag`: each endpoint in turn (a member's defragmentation is its own).
Status RunDefrag(Ctl& ctl, bool cluster) {
  Result<std::vector<std::string>> endpoints = TargetEndpoints(ctl, cluster);
  if (!endpoints.ok()) return endpoints.status();
  Result<std::unique_ptr<client::Client>> client = ctl.ClientFor(*endpoints);
  if (!client.ok()) return client.status();
  Status failed;
  for (std::size_t i = 0; i < endpoints->size(); ++i) {
    const std::string& ep = (*endpoints)[i];
    Result<etcdserverpb::DefragmentResponse> r = client::Defragment(**client, i, ctl.Call());
    if (!r.ok()) {
      std::cerr << fmt::format("Failed to defragment etcd member[{}] ({})\n", ep,
                               ErrorLine(r.status()));
      if (failed.ok()) failed = r.status();
      continue;
    }
    ctl.out() << fmt::format("Finished defragmenting etcd member[{}]\n", ep);
  }
  return failed;
}

template <typename Response>
Status PrintMemberChange(Ctl& ctl, const Result<Response>& r, const std::string& what) {
  if (!r.ok()) return r.status();
  Result<bool> printed = PrintMachine(ctl, *r);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    ctl.out() << what << "\n";
  }
  return Status::Ok();
}

void RegisterMember(CLI::App& app, Ctl& ctl) {
  CLI::App* member = app.add_subcommand("member", "Membership related commands");
  member->require_subcommand(1);
  member->add_subcommand("list", "Lists all members in the cluster")->callback(Runner(ctl, [&ctl] {
    return RunMemberList(ctl);
  }));

  struct AddFlags {
    std::string name;
    std::string peer_urls;
    bool learner = false;
  };
  auto add = std::make_shared<AddFlags>();
  CLI::App* add_cmd = member->add_subcommand("add", "Adds a member into the cluster");
  add_cmd->add_option("name", add->name, "Member name")->required();
  add_cmd->add_option("--peer-urls", add->peer_urls, "Comma separated peer URLs")->required();
  add_cmd->add_flag("--learner", add->learner, "Add as a learner");
  add_cmd->callback(Runner(ctl, [&ctl, add]() -> Status {
    Result<client::Client*> client = ctl.GetClient();
    if (!client.ok()) return client.status();
    etcdserverpb::MemberAddRequest request;
    std::stringstream urls(add->peer_urls);
    for (std::string url; std::getline(urls, url, ',');) request.add_peerurls(url);
    request.set_islearner(add->learner);
    auto r = client::MemberAdd(**client, request, ctl.Call());
    if (!r.ok()) return r.status();
    Status printed = PrintMemberChange(ctl, r,
                                       fmt::format("Member {:>16x} added to cluster {:>16x}",
                                                   r->member().id(), r->header().cluster_id()));
    if (!printed.ok() || ctl.format() != OutputFormat::kSimple) return printed;
    // etcdctl's environment for starting the new member.
    std::vector<std::string> conf;
    for (const auto& m : r->members()) {
      const std::string& name = m.id() == r->member().id() ? add->name : m.name();
      for (const auto& u : m.peerurls()) conf.push_back(fmt::format("{}={}", name, u));
    }
    ctl.out() << fmt::format(
        "\nETCD_NAME=\"{}\"\nETCD_INITIAL_CLUSTER=\"{}\"\n"
        "ETCD_INITIAL_ADVERTISE_PEER_URLS=\"{}\"\nETCD_INITIAL_CLUSTER_STATE=\"existing\"\n",
        add->name, fmt::join(conf, ","), add->peer_urls);
    return Status::Ok();
  }));

  auto remove_id = std::make_shared<std::string>();
  CLI::App* remove = member->add_subcommand("remove", "Removes a member from the cluster");
  remove->add_option("id", *remove_id, "Member ID (hexadecimal)")->required();
  remove->callback(Runner(ctl, [&ctl, remove_id]() -> Status {
    Result<std::int64_t> id = ParseHexId(*remove_id, "member");
    if (!id.ok()) return id.status();
    Result<client::Client*> client = ctl.GetClient();
    if (!client.ok()) return client.status();
    auto r = client::MemberRemove(**client, static_cast<std::uint64_t>(*id), ctl.Call());
    if (!r.ok()) return r.status();
    return PrintMemberChange(
        ctl, r,
        fmt::format("Member {:>16x} removed from cluster {:>16x}", static_cast<std::uint64_t>(*id),
                    r->header().cluster_id()));
  }));

  struct UpdateFlags {
    std::string id;
    std::string peer_urls;
  };
  auto update = std::make_shared<UpdateFlags>();
  CLI::App* update_cmd = member->add_subcommand("update", "Updates a member in the cluster");
  update_cmd->add_option("id", update->id, "Member ID (hexadecimal)")->required();
  update_cmd->add_option("--peer-urls", update->peer_urls, "Comma separated peer URLs")->required();
  update_cmd->callback(Runner(ctl, [&ctl, update]() -> Status {
    Result<std::int64_t> id = ParseHexId(update->id, "member");
    if (!id.ok()) return id.status();
    Result<client::Client*> client = ctl.GetClient();
    if (!client.ok()) return client.status();
    std::vector<std::string> urls;
    std::stringstream in(update->peer_urls);
    for (std::string url; std::getline(in, url, ',');) urls.push_back(url);
    auto r = client::MemberUpdate(**client, static_cast<std::uint64_t>(*id), urls, ctl.Call());
    if (!r.ok()) return r.status();
    return PrintMemberChange(
        ctl, r,
        fmt::format("Member {:>16x} updated in cluster {:>16x}", static_cast<std::uint64_t>(*id),
                    r->header().cluster_id()));
  }));

  auto promote_id = std::make_shared<std::string>();
  CLI::App* promote = member->add_subcommand("promote", "Promotes a non-voting member");
  promote->add_option("id", *promote_id, "Member ID (hexadecimal)")->required();
  promote->callback(Runner(ctl, [&ctl, promote_id]() -> Status {
    Result<std::int64_t> id = ParseHexId(*promote_id, "member");
    if (!id.ok()) return id.status();
    Result<client::Client*> client = ctl.GetClient();
    if (!client.ok()) return client.status();
    auto r = client::MemberPromote(**client, static_cast<std::uint64_t>(*id), ctl.Call());
    if (!r.ok()) return r.status();
    return PrintMemberChange(
        ctl, r,
        fmt::format("Member {:>16x} promoted in cluster {:>16x}", static_cast<std::uint64_t>(*id),
                    r->header().cluster_id()));
  }));
}

}  // namespace

void RegisterClusterCommands(CLI::App& app, Ctl& ctl) {
  RegisterMember(app, ctl);

  CLI::App* endpoint = app.add_subcommand("endpoint", "Endpoint related commands");
  endpoint->require_subcommand(1);
  auto cluster = std::make_shared<bool>(false);
  CLI::App* status = endpoint->add_subcommand("status", "Prints out the status of endpoints");
  status->add_flag("--cluster", *cluster, "Use all endpoints from the cluster member list");
  status->callback(Runner(ctl, [&ctl, cluster] { return RunEndpointStatus(ctl, *cluster); }));
  CLI::App* health = endpoint->add_subcommand("health", "Checks the healthiness of endpoints");
  health->add_flag("--cluster", *cluster, "Use all endpoints from the cluster member list");
  health->callback(Runner(ctl, [&ctl, cluster] { return RunEndpointHealth(ctl, *cluster); }));
  auto rev = std::make_shared<std::int64_t>(0);
  CLI::App* hashkv = endpoint->add_subcommand(
      "hashkv", "Prints the KV history hash for each endpoint in --endpoints");
  hashkv->add_flag("--cluster", *cluster, "Use all endpoints from the cluster member list");
  hashkv->add_option("--rev", *rev, "Maximum revision to hash (default: all revisions)");
  hashkv->callback(
      Runner(ctl, [&ctl, cluster, rev] { return RunEndpointHashKV(ctl, *cluster, *rev); }));

  auto target = std::make_shared<std::string>();
  CLI::App* move = app.add_subcommand("move-leader", "Transfers leadership to another member");
  move->add_option("transferee", *target, "Member ID (hexadecimal)")->required();
  move->callback(Runner(ctl, [&ctl, target] { return RunMoveLeader(ctl, *target); }));

  CLI::App* alarm = app.add_subcommand("alarm", "Alarm related commands");
  alarm->require_subcommand(1);
  alarm->add_subcommand("list", "Lists all alarms")->callback(Runner(ctl, [&ctl] {
    return RunAlarmList(ctl);
  }));
  alarm->add_subcommand("disarm", "Disarms all alarms")->callback(Runner(ctl, [&ctl] {
    return RunAlarmDisarm(ctl);
  }));

  auto defrag_cluster = std::make_shared<bool>(false);
  CLI::App* defrag = app.add_subcommand("defrag", "Defragments the storage of the members");
  defrag->add_flag("--cluster", *defrag_cluster, "Use all endpoints from the cluster member list");
  defrag->callback(Runner(ctl, [&ctl, defrag_cluster] { return RunDefrag(ctl, *defrag_cluster); }));
}

}  // namespace epoch::ctl
