// lease grant / revoke / keep-alive / timetolive / list (etcd wire) and lease show (epoch.v1).
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "commands.h"
#include "epoch/client/admin.h"
#include "epoch/etcd_errors.h"
#include "fields_output.h"
#include "go_json.h"
#include "machine_output.h"
#include "output.h"

namespace epoch::ctl {
namespace {

Status LeaseNotFound() { return etcd_errors::kLeaseNotFound.ToStatus(); }

// clientv3 hands etcdctl these responses in structs of its own: `json` and `fields` print that
// struct, and `protobuf` marshals the header alone (the struct embeds *pb.ResponseHeader, whose
// Marshal method Go promotes). True when printed, false for simple and table.
bool PrintWrapper(Ctl& ctl, const etcdserverpb::ResponseHeader& header,
                  const std::function<std::string()>& json,
                  const std::function<std::string()>& fields) {
  switch (ctl.format()) {
    case OutputFormat::kJson: ctl.out() << json() << "\n"; return true;
    case OutputFormat::kFields: ctl.out() << fields(); return true;
    case OutputFormat::kProtobuf: ctl.out() << header.SerializeAsString(); return true;
    case OutputFormat::kSimple:
    case OutputFormat::kTable: break;
  }
  return false;
}

std::string LeaseJson(const etcdserverpb::ResponseHeader* header, std::int64_t id, std::int64_t ttl,
                      const std::string* error) {
  GoJsonObject object;
  object.Embed(header).Int("ID", id).Int("TTL", ttl);
  if (error != nullptr) object.String("Error", *error);
  return object.Close();
}

Status RunGrant(Ctl& ctl, std::int64_t ttl) {
  if (ttl <= 0) return Status::InvalidArgument("lease TTL must be positive (seconds)");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl);
  Result<etcdserverpb::LeaseGrantResponse> response = (*client)->LeaseGrant(request, ctl.Call());
  if (!response.ok()) return response.status();
  if (!response->error().empty()) return Status::FailedPrecondition(response->error());
  const etcdserverpb::LeaseGrantResponse& r = *response;
  const bool printed = PrintWrapper(
      ctl, r.header(),
      [&r] {
        return LeaseJson(r.has_header() ? &r.header() : nullptr, r.id(), r.ttl(), &r.error());
      },
      [&r] { return FieldsOfLease(r.header(), r.id(), r.ttl()); });
  if (!printed) {
    ctl.out() << fmt::format("lease {} granted with TTL({}s)\n", LeaseHex(response->id()),
                             response->ttl());
  }
  return Status::Ok();
}

Status RunRevoke(Ctl& ctl, std::int64_t id) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  Result<etcdserverpb::LeaseRevokeResponse> response = (*client)->LeaseRevoke(request, ctl.Call());
  if (!response.ok()) return response.status();
  Result<bool> printed = PrintMachine(ctl, *response);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    ctl.out() << fmt::format("lease {} revoked\n", LeaseHex(id));
  }
  return Status::Ok();
}

Status PrintKeepAlive(Ctl& ctl, const etcdserverpb::LeaseKeepAliveResponse& r) {
  const bool printed = PrintWrapper(
      ctl, r.header(),
      [&r] { return LeaseJson(r.has_header() ? &r.header() : nullptr, r.id(), r.ttl(), nullptr); },
      [&r] { return FieldsOfLease(r.header(), r.id(), r.ttl()); });
  if (!printed) {
    ctl.out() << fmt::format("lease {} keepalived with TTL({})\n", LeaseHex(r.id()), r.ttl());
  }
  ctl.out().flush();
  return Status::Ok();
}

// Renews every TTL/3 until interrupted or the lease is gone (then an error, like etcdctl's
// "lease expired or revoked"). Each renewal is one short call (KeepAliveOnce), so a broken
// connection moves to another endpoint on the next renewal.
Status RunKeepAlive(Ctl& ctl, std::int64_t id, bool once) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  while (!ctl.stop().stop_requested()) {
    Result<etcdserverpb::LeaseKeepAliveResponse> r =
        (*client)->LeaseKeepAliveOnce(LeaseId(id), ctl.Call());
    if (!r.ok()) return ctl.stop().stop_requested() ? Status::Ok() : r.status();
    if (r->ttl() <= 0) {
      if (once) return LeaseNotFound();
      return Status::NotFound(fmt::format("lease {} expired or revoked", LeaseHex(id)));
    }
    EPOCH_RETURN_IF_ERROR(PrintKeepAlive(ctl, *r));
    if (once) return Status::Ok();
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait_for(lock, ctl.stop(), std::chrono::milliseconds(r->ttl() * 1000 / 3),
                [] { return false; });
  }
  return Status::Ok();
}

Status RunTimeToLive(Ctl& ctl, std::int64_t id, bool keys) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  request.set_keys(keys);
  Result<etcdserverpb::LeaseTimeToLiveResponse> r = (*client)->LeaseTimeToLive(request, ctl.Call());
  if (!r.ok()) return r.status();
  const etcdserverpb::LeaseTimeToLiveResponse& ttl = *r;
  const bool printed = PrintWrapper(
      ctl, ttl.header(),
      [&ttl] {
        std::string names = ttl.keys_size() == 0 ? "null" : "[";
        for (const std::string& key : ttl.keys()) {
          names += (names.size() > 1 ? "," : "") + GoJsonBytes(key);
        }
        if (ttl.keys_size() > 0) names += "]";
        return GoJsonObject()
            .Embed(ttl.has_header() ? &ttl.header() : nullptr)
            .Int("id", ttl.id())
            .Int("ttl", ttl.ttl())
            .Int("granted-ttl", ttl.grantedttl())
            .Raw("keys", names)
            .Close();
      },
      [&ttl] { return FieldsOf(ttl); });
  if (printed) return Status::Ok();
  if (r->ttl() == -1) {
    ctl.out() << fmt::format("lease {} already expired\n", LeaseHex(id));
    return Status::Ok();
  }
  std::string line = fmt::format("lease {} granted with TTL({}s), remaining({}s)", LeaseHex(id),
                                 r->grantedttl(), r->ttl());
  if (keys) {
    std::string names;
    for (const std::string& key : r->keys()) names += (names.empty() ? "" : " ") + key;
    line += fmt::format(", attached keys([{}])", names);
  }
  ctl.out() << line << "\n";
  return Status::Ok();
}

Status RunList(Ctl& ctl) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::LeaseLeasesResponse> r = (*client)->LeaseLeases(ctl.Call());
  if (!r.ok()) return r.status();
  const etcdserverpb::LeaseLeasesResponse& list = *r;
  const bool printed = PrintWrapper(
      ctl, list.header(),
      [&list] {
        std::string leases = "[";
        for (const auto& lease : list.leases()) {
          leases += (leases.size() > 1 ? "," : "") + GoJsonObject().Int("id", lease.id()).Close();
        }
        return GoJsonObject()
            .Embed(list.has_header() ? &list.header() : nullptr)
            .Raw("leases", leases + "]")
            .Close();
      },
      [&list] { return FieldsOf(list); });
  if (printed) return Status::Ok();
  if (ctl.format() == OutputFormat::kTable) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& lease : r->leases()) rows.push_back({LeaseHex(lease.id())});
    PrintTable(ctl.out(), {"ID"}, rows);
  } else {
    ctl.out() << fmt::format("found {} leases\n", r->leases_size());
    for (const auto& lease : r->leases()) ctl.out() << LeaseHex(lease.id()) << "\n";
  }
  return Status::Ok();
}

// Epoch's view: the deadline on the replicated cluster clock, how late expiry may be noticed,
// and the attached keys with their fencing tokens.
Status RunShow(Ctl& ctl, std::int64_t id) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<v1::LeaseStatusResponse> r = client::LeaseStatus(**client, LeaseId(id), true, ctl.Call());
  if (!r.ok()) return r.status();
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << GoJson(*r) << "\n";
    return Status::Ok();
  }
  std::int64_t token = 0;
  for (const auto& key : r->keys()) token = std::max(token, key.fencing_token());
  if (ctl.format() == OutputFormat::kTable) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& key : r->keys()) {
      rows.push_back({key.key(), std::to_string(key.fencing_token())});
    }
    PrintTable(
        ctl.out(), {"ID", "GRANTED TTL", "REMAINING", "CLUSTER NOW", "DEADLINE", "MAX EXTENSION"},
        {{LeaseHex(id), fmt::format("{}ms", r->granted_ttl_ms()),
          fmt::format("{}ms", r->remaining_ttl_ms()), fmt::format("{}ms", r->now_cluster_ms()),
          fmt::format("{}ms", r->deadline_cluster_ms()),
          fmt::format("{}ms", r->max_extension_ms())}});
    if (!rows.empty()) PrintTable(ctl.out(), {"KEY", "FENCING TOKEN"}, rows);
    return Status::Ok();
  }
  std::ostream& out = ctl.out();
  out << fmt::format("lease {}\n", LeaseHex(id));
  out << fmt::format("granted TTL:        {} ms\n", r->granted_ttl_ms());
  out << fmt::format("remaining:          {} ms\n", r->remaining_ttl_ms());
  out << fmt::format("cluster clock now:  {} ms\n", r->now_cluster_ms());
  out << fmt::format("deadline (cluster): {} ms\n", r->deadline_cluster_ms());
  out << fmt::format("max extension:      {} ms\n", r->max_extension_ms());
  out << fmt::format("fencing token:      {}\n",
                     token == 0 ? std::string("-") : std::to_string(token));
  out << fmt::format("attached keys:      {}\n", r->keys_size());
  for (const auto& key : r->keys()) {
    out << fmt::format("  {} token={}\n", key.key(), key.fencing_token());
  }
  return Status::Ok();
}

// Adds "ID" (hex) to `cmd` and returns a parser for it.
std::function<Result<std::int64_t>()> AddLeaseId(CLI::App* cmd, std::shared_ptr<std::string> id) {
  cmd->add_option("id", *id, "Lease ID (hexadecimal)")->required();
  return [id] { return ParseHexId(*id, "lease"); };
}

template <typename Fn>
std::function<Status()> WithId(std::function<Result<std::int64_t>()> parse, Fn fn) {
  return [parse = std::move(parse), fn = std::move(fn)]() -> Status {
    Result<std::int64_t> id = parse();
    if (!id.ok()) return id.status();
    return fn(*id);
  };
}

}  // namespace

void RegisterLeaseCommands(CLI::App& app, Ctl& ctl) {
  CLI::App* lease = app.add_subcommand("lease", "Lease related commands");
  lease->require_subcommand(1);

  auto ttl = std::make_shared<std::int64_t>(0);
  CLI::App* grant = lease->add_subcommand("grant", "Creates leases");
  grant->add_option("ttl", *ttl, "TTL in seconds")->required();
  grant->callback(Runner(ctl, [&ctl, ttl] { return RunGrant(ctl, *ttl); }));

  auto revoke_id = std::make_shared<std::string>();
  CLI::App* revoke = lease->add_subcommand("revoke", "Revokes leases");
  revoke->callback(Runner(ctl, WithId(AddLeaseId(revoke, revoke_id),
                                      [&ctl](std::int64_t id) { return RunRevoke(ctl, id); })));

  auto keep_id = std::make_shared<std::string>();
  auto once = std::make_shared<bool>(false);
  CLI::App* keep = lease->add_subcommand("keep-alive", "Keeps leases alive (renew)");
  keep->add_flag("--once", *once, "Resets the keep-alive time to its original value once");
  keep->callback(Runner(ctl, WithId(AddLeaseId(keep, keep_id), [&ctl, once](std::int64_t id) {
                          return RunKeepAlive(ctl, id, *once);
                        })));

  auto ttl_id = std::make_shared<std::string>();
  auto keys = std::make_shared<bool>(false);
  CLI::App* ttl_cmd = lease->add_subcommand("timetolive", "Get lease information");
  ttl_cmd->add_flag("--keys", *keys, "Get keys attached to this lease");
  ttl_cmd->callback(Runner(ctl, WithId(AddLeaseId(ttl_cmd, ttl_id), [&ctl, keys](std::int64_t id) {
                             return RunTimeToLive(ctl, id, *keys);
                           })));

  CLI::App* list = lease->add_subcommand("list", "List all active leases");
  list->callback(Runner(ctl, [&ctl] { return RunList(ctl); }));

  auto show_id = std::make_shared<std::string>();
  CLI::App* show = lease->add_subcommand(
      "show", "Epoch view: deadline on the cluster clock, maximum extension, keys and tokens");
  show->callback(Runner(ctl, WithId(AddLeaseId(show, show_id),
                                    [&ctl](std::int64_t id) { return RunShow(ctl, id); })));
}

}  // namespace epoch::ctl
