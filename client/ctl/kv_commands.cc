// put, get, del, compaction: etcdctl's flags and output over Client
// (docs/etcd-compatibility.md §2).
#include <fmt/format.h>

#include <iostream>
#include <iterator>
#include <memory>

#include "commands.h"
#include "go_json.h"
#include "machine_output.h"
#include "output.h"

namespace epoch::ctl {
namespace {

using etcdserverpb::RangeRequest;

Result<RangeRequest::SortTarget> SortTargetOf(const std::string& name) {
  if (name.empty() || name == "KEY") return RangeRequest::KEY;
  if (name == "CREATE") return RangeRequest::CREATE;
  if (name == "MODIFY") return RangeRequest::MOD;
  if (name == "VALUE") return RangeRequest::VALUE;
  if (name == "VERSION") return RangeRequest::VERSION;
  return Status::InvalidArgument(fmt::format("bad sort target \"{}\"", name));
}

Result<RangeRequest::SortOrder> SortOrderOf(const std::string& name, bool target_given) {
  if (name.empty()) return target_given ? RangeRequest::ASCEND : RangeRequest::NONE;
  if (name == "ASCEND") return RangeRequest::ASCEND;
  if (name == "DESCEND") return RangeRequest::DESCEND;
  return Status::InvalidArgument(fmt::format("bad sort order \"{}\"", name));
}

// key [range_end] with --prefix / --from-key, as clientv3 WithPrefix / WithFromKey.
Status ResolveRange(const std::string& key, const std::string& range_end, bool prefix,
                    bool from_key, std::string* out_key, std::string* out_end) {
  if (prefix && from_key) return Status::InvalidArgument("--prefix and --from-key cannot be mixed");
  if ((prefix || from_key) && !range_end.empty()) {
    return Status::InvalidArgument("too many arguments: range_end with --prefix or --from-key");
  }
  *out_key = key;
  *out_end = range_end;
  if (prefix) {
    if (key.empty()) *out_key = std::string(1, '\0');
    *out_end = key.empty() ? std::string(1, '\0') : client::PrefixRangeEnd(key);
  }
  if (from_key) {
    if (key.empty()) *out_key = std::string(1, '\0');
    *out_end = std::string(1, '\0');
  }
  return Status::Ok();
}

void PrintKv(std::ostream& out, const mvccpb::KeyValue& kv) {
  out << kv.key() << "\n" << kv.value() << "\n";
}

std::vector<std::vector<std::string>> KvRows(
    const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& kv : kvs) {
    rows.push_back({kv.key(), kv.value(), std::to_string(kv.create_revision()),
                    std::to_string(kv.mod_revision()), std::to_string(kv.version()),
                    kv.lease() == 0 ? "" : LeaseHex(kv.lease())});
  }
  return rows;
}

const std::vector<std::string> kKvHeaders = {"KEY",     "VALUE",   "CREATE REV",
                                             "MOD REV", "VERSION", "LEASE"};

Status RunGet(Ctl& ctl, const GetFlags& f) {
  if (f.print_value_only && ctl.format() != OutputFormat::kSimple) {
    return Status::InvalidArgument("print-value-only is only for `--write-out=simple`");
  }
  Result<etcdserverpb::RangeRequest> request = BuildRange(f);
  if (!request.ok()) return request.status();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::RangeResponse> response = (*client)->Range(*request, ctl.Call());
  if (!response.ok()) return response.status();
  Result<bool> printed = PrintMachine(ctl, *response);
  if (!printed.ok()) return printed.status();
  if (*printed) return Status::Ok();
  if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(), kKvHeaders, KvRows(response->kvs()));
  } else {
    PrintRange(ctl.out(), *response, f);
  }
  return Status::Ok();
}

Status RunPut(Ctl& ctl, PutFlags f, bool value_given) {
  if (!value_given && !f.ignore_value) {
    f.value.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  Result<etcdserverpb::PutRequest> request = BuildPut(f);
  if (!request.ok()) return request.status();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::PutResponse> response = (*client)->Put(*request, ctl.Call());
  if (!response.ok()) return response.status();
  Result<bool> printed = PrintMachine(ctl, *response);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    PrintPut(ctl.out(), *response);
  }
  return Status::Ok();
}

Status RunDel(Ctl& ctl, const DelFlags& f) {
  Result<etcdserverpb::DeleteRangeRequest> request = BuildDelete(f);
  if (!request.ok()) return request.status();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::DeleteRangeResponse> response = (*client)->DeleteRange(*request, ctl.Call());
  if (!response.ok()) return response.status();
  Result<bool> printed = PrintMachine(ctl, *response);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    PrintDelete(ctl.out(), *response);
  }
  return Status::Ok();
}

Status RunCompaction(Ctl& ctl, std::int64_t revision, bool physical) {
  if (revision <= 0) return Status::InvalidArgument("compaction revision must be positive");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  etcdserverpb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(physical);
  Result<etcdserverpb::CompactionResponse> response = (*client)->Compact(request, ctl.Call());
  if (!response.ok()) return response.status();
  ctl.out() << "compacted revision " << revision << "\n";  // etcdctl: in every format
  return Status::Ok();
}

}  // namespace

void AddGetFlags(CLI::App& cmd, GetFlags& f) {
  cmd.add_option("key", f.key, "Key (or start of the range)")->required();
  cmd.add_option("range_end", f.range_end, "End of the range [key, range_end)");
  cmd.add_flag("--prefix", f.prefix, "Get keys with matching prefix");
  cmd.add_flag("--from-key", f.from_key,
               "Get keys that are greater than or equal to the given key");
  cmd.add_option("--limit", f.limit, "Maximum number of results");
  cmd.add_option("--rev", f.rev, "Specify the kv revision");
  cmd.add_flag("--keys-only", f.keys_only, "Get only the keys");
  cmd.add_flag("--count-only", f.count_only, "Get only the count");
  cmd.add_flag("--print-value-only", f.print_value_only,
               "Only write values when using the simple output format");
  cmd.add_option("--sort-by", f.sort_by, "Sort target: CREATE, KEY, MODIFY, VALUE, or VERSION")
      ->check(CLI::IsMember({"CREATE", "KEY", "MODIFY", "VALUE", "VERSION"}, CLI::ignore_case));
  cmd.add_option("--order", f.order, "Order of results: ASCEND or DESCEND")
      ->check(CLI::IsMember({"ASCEND", "DESCEND"}, CLI::ignore_case));
  cmd.add_option("--consistency", f.consistency, "Linearizable(l) or Serializable(s)")
      ->check(CLI::IsMember({"l", "s"}));
}

void AddPutFlags(CLI::App& cmd, PutFlags& f) {
  cmd.add_option("key", f.key, "Key")->required();
  cmd.add_option("value", f.value, "Value (read from stdin when omitted)");
  cmd.add_option("--lease", f.lease, "Lease ID (in hexadecimal) to attach to the key");
  cmd.add_flag("--prev-kv", f.prev_kv, "Return the previous key-value pair before modification");
  cmd.add_flag("--ignore-value", f.ignore_value, "Update the key using its current value");
  cmd.add_flag("--ignore-lease", f.ignore_lease, "Update the key using its current lease");
}

void AddDelFlags(CLI::App& cmd, DelFlags& f) {
  cmd.add_option("key", f.key, "Key (or start of the range)")->required();
  cmd.add_option("range_end", f.range_end, "End of the range [key, range_end)");
  cmd.add_flag("--prefix", f.prefix, "Delete keys with matching prefix");
  cmd.add_flag("--from-key", f.from_key,
               "Delete keys that are greater than or equal to the given key");
  cmd.add_flag("--prev-kv", f.prev_kv, "Return deleted key-value pairs");
}

Result<etcdserverpb::RangeRequest> BuildRange(const GetFlags& f) {
  RangeRequest request;
  std::string key, end;
  EPOCH_RETURN_IF_ERROR(ResolveRange(f.key, f.range_end, f.prefix, f.from_key, &key, &end));
  request.set_key(key);
  request.set_range_end(end);
  if (f.limit < 0) return Status::InvalidArgument("--limit must not be negative");
  request.set_limit(f.limit);
  request.set_revision(f.rev);
  std::string sort_by = f.sort_by, order = f.order;
  for (char& c : sort_by) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (char& c : order) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  Result<RangeRequest::SortTarget> target = SortTargetOf(sort_by);
  if (!target.ok()) return target.status();
  Result<RangeRequest::SortOrder> sort_order = SortOrderOf(order, !sort_by.empty());
  if (!sort_order.ok()) return sort_order.status();
  request.set_sort_target(*target);
  request.set_sort_order(*sort_order);
  if (f.consistency != "l" && f.consistency != "s") {
    return Status::InvalidArgument(fmt::format("unknown consistency flag \"{}\"", f.consistency));
  }
  request.set_serializable(f.consistency == "s");
  request.set_keys_only(f.keys_only);
  request.set_count_only(f.count_only);
  return request;
}

Result<etcdserverpb::PutRequest> BuildPut(const PutFlags& f) {
  Result<std::int64_t> lease = ParseHexId(f.lease, "lease");
  if (!lease.ok()) return lease.status();
  if (f.ignore_lease && *lease != 0) {
    return Status::InvalidArgument("--ignore-lease and --lease cannot be mixed");
  }
  if (f.ignore_value && !f.value.empty()) {
    return Status::InvalidArgument("--ignore-value and a value cannot be mixed");
  }
  etcdserverpb::PutRequest request;
  request.set_key(f.key);
  request.set_value(f.value);
  request.set_lease(*lease);
  request.set_prev_kv(f.prev_kv);
  request.set_ignore_value(f.ignore_value);
  request.set_ignore_lease(f.ignore_lease);
  return request;
}

Result<etcdserverpb::DeleteRangeRequest> BuildDelete(const DelFlags& f) {
  etcdserverpb::DeleteRangeRequest request;
  std::string key, end;
  EPOCH_RETURN_IF_ERROR(ResolveRange(f.key, f.range_end, f.prefix, f.from_key, &key, &end));
  request.set_key(key);
  request.set_range_end(end);
  request.set_prev_kv(f.prev_kv);
  return request;
}

void PrintRange(std::ostream& out, const etcdserverpb::RangeResponse& r, const GetFlags& f) {
  if (f.count_only) {
    out << r.count() << "\n";
    return;
  }
  for (const auto& kv : r.kvs()) {
    if (f.print_value_only) {
      out << kv.value() << "\n";
    } else {
      PrintKv(out, kv);  // with --keys-only the value is empty: etcdctl's blank line
    }
  }
}

void PrintPut(std::ostream& out, const etcdserverpb::PutResponse& r) {
  out << "OK\n";
  if (r.has_prev_kv()) PrintKv(out, r.prev_kv());
}

void PrintDelete(std::ostream& out, const etcdserverpb::DeleteRangeResponse& r) {
  out << r.deleted() << "\n";
  for (const auto& kv : r.prev_kvs()) PrintKv(out, kv);
}

void RegisterKvCommands(CLI::App& app, Ctl& ctl) {
  auto get = std::make_shared<GetFlags>();
  CLI::App* get_cmd = app.add_subcommand("get", "Gets the key or a range of keys");
  AddGetFlags(*get_cmd, *get);
  get_cmd->callback(Runner(ctl, [&ctl, get] { return RunGet(ctl, *get); }));

  auto put = std::make_shared<PutFlags>();
  CLI::App* put_cmd = app.add_subcommand("put", "Puts the given key into the store");
  AddPutFlags(*put_cmd, *put);
  put_cmd->callback(
      Runner(ctl, [&ctl, put, put_cmd] { return RunPut(ctl, *put, put_cmd->count("value") > 0); }));

  auto del = std::make_shared<DelFlags>();
  CLI::App* del_cmd = app.add_subcommand("del", "Removes the specified key or range of keys");
  AddDelFlags(*del_cmd, *del);
  del_cmd->callback(Runner(ctl, [&ctl, del] { return RunDel(ctl, *del); }));

  struct Compaction {
    std::int64_t revision = 0;
    bool physical = false;
  };
  auto compaction = std::make_shared<Compaction>();
  CLI::App* cmd = app.add_subcommand("compaction", "Compacts the event history");
  cmd->add_option("revision", compaction->revision, "Revision to compact up to")->required();
  cmd->add_flag("--physical", compaction->physical,
                "Wait until the compaction is physically applied");
  cmd->callback(Runner(ctl, [&ctl, compaction] {
    return RunCompaction(ctl, compaction->revision, compaction->physical);
  }));
}

}  // namespace epoch::ctl
