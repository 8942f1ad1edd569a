// jobs list / show / dlq: read-only views of the job runner's keys (client/README.md, "Key
// layout", epoch::client::JobKeys): P jobs/<id> (the job), P lock/<id>/<lease> (holder queue,
// the etcd lock recipe), P epoch/<id> (holders so far and the latest token), P dlq/<id>
// (dead-lettered), P done/<id> (completed). P is --prefix (default "epoch-jobs/").
#include <fmt/format.h>

#include <map>

#include "commands.h"
#include "epoch/client/admin.h"
#include "epoch/client/job.h"
#include "go_json.h"
#include "output.h"

namespace epoch::ctl {
namespace {

struct JobsFlags {
  std::string prefix = "epoch-jobs/";
  std::string id;
  std::int64_t limit = 0;
};

Result<etcdserverpb::RangeResponse> RangePrefix(Ctl& ctl, client::Client& client,
                                                const std::string& prefix, std::int64_t limit) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(client::PrefixRangeEnd(prefix));
  range.set_limit(limit);
  return client.Range(range, ctl.Call());
}

std::string FirstLine(const std::string& value) { return value.substr(0, value.find('\n')); }

// One row per job under `list_prefix` (jobs/ or dlq/), joined with the epoch records and the
// current holders (the lowest create_revision under each lock name).
Status ListJobs(Ctl& ctl, const JobsFlags& f, bool dlq) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  const client::JobKeys keys{f.prefix};
  const std::string list_prefix = dlq ? keys.Dlq() : keys.Jobs();
  Result<etcdserverpb::RangeResponse> jobs = RangePrefix(ctl, **client, list_prefix, f.limit);
  if (!jobs.ok()) return jobs.status();
  Result<etcdserverpb::RangeResponse> epochs = RangePrefix(ctl, **client, keys.Epochs(), 0);
  if (!epochs.ok()) return epochs.status();
  Result<etcdserverpb::RangeResponse> locks = RangePrefix(ctl, **client, f.prefix + "lock/", 0);
  if (!locks.ok()) return locks.status();
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << fmt::format("{{\"jobs\":{},\"epochs\":{},\"locks\":{}}}\n", GoJson(*jobs),
                             GoJson(*epochs), GoJson(*locks));
    return Status::Ok();
  }
  std::map<std::string, std::string> epoch_of;
  for (const auto& kv : epochs->kvs()) epoch_of[kv.key().substr(keys.Epochs().size())] = kv.value();
  std::map<std::string, const mvccpb::KeyValue*> holder_of;  // id -> first-created lock key
  const std::string lock_prefix = f.prefix + "lock/";
  for (const auto& kv : locks->kvs()) {
    const std::string rest = kv.key().substr(lock_prefix.size());
    const std::string id = rest.substr(0, rest.rfind('/'));
    auto [it, inserted] = holder_of.emplace(id, &kv);
    if (!inserted && kv.create_revision() < it->second->create_revision()) it->second = &kv;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& kv : jobs->kvs()) {
    const std::string id = kv.key().substr(list_prefix.size());
    std::string epoch = "0", token = "-";
    if (auto e = epoch_of.find(id); e != epoch_of.end()) {
      Result<client::EpochRecord> record = client::ParseEpochRecord(e->second);
      if (record.ok()) {
        epoch = std::to_string(record->epoch);
        token = std::to_string(record->token.value());
      } else {
        epoch = "? (" + e->second + ")";
      }
    }
    std::string holder = "-";
    if (auto h = holder_of.find(id); h != holder_of.end()) {
      holder =
          fmt::format("{} (token {})", LeaseHex(h->second->lease()), h->second->create_revision());
    }
    rows.push_back({id, FirstLine(kv.value()), epoch, token, holder});
  }
  if (ctl.format() == OutputFormat::kTable) {
    PrintTable(ctl.out(), {"JOB", "SPEC", "EPOCH", "LAST TOKEN", "HOLDER LEASE"}, rows);
    return Status::Ok();
  }
  ctl.out() << fmt::format("found {} {} under {}{}\n", jobs->count(),
                           dlq ? "dead-lettered jobs" : "jobs", list_prefix,
                           jobs->more() ? " (more not shown)" : "");
  for (const auto& row : rows) {
    ctl.out() << fmt::format("{}, {}, epoch={}, last_token={}, holder={}\n", row[0], row[1], row[2],
                             row[3], row[4]);
  }
  return Status::Ok();
}

Status ShowJob(Ctl& ctl, const JobsFlags& f) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  const client::JobKeys keys{f.prefix};
  std::optional<mvccpb::KeyValue> job;
  std::string state;
  for (const auto& [key, name] : {std::pair{keys.Job(f.id), "queued or running"},
                                  std::pair{keys.DlqJob(f.id), "dead-lettered"},
                                  std::pair{keys.DoneJob(f.id), "completed"}}) {
    Result<std::optional<mvccpb::KeyValue>> kv = (*client)->Get(key, ctl.Call());
    if (!kv.ok()) return kv.status();
    if (kv->has_value()) {
      job = **kv;
      state = name;
      break;
    }
  }
  if (!job) return Status::NotFound(fmt::format("job {} not found under {}", f.id, f.prefix));
  Result<std::optional<mvccpb::KeyValue>> epoch = (*client)->Get(keys.Epoch(f.id), ctl.Call());
  if (!epoch.ok()) return epoch.status();
  Result<etcdserverpb::RangeResponse> queue =
      RangePrefix(ctl, **client, keys.LockName(f.id) + "/", 0);
  if (!queue.ok()) return queue.status();
  const mvccpb::KeyValue* holder = nullptr;
  for (const auto& kv : queue->kvs()) {
    if (holder == nullptr || kv.create_revision() < holder->create_revision()) holder = &kv;
  }
  std::optional<v1::LeaseStatusResponse> lease;
  if (holder != nullptr && holder->lease() != 0) {
    Result<v1::LeaseStatusResponse> s =
        client::LeaseStatus(**client, LeaseId(holder->lease()), false, ctl.Call());
    if (s.ok()) lease = *s;
  }
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << fmt::format("{{\"job\":{},\"state\":\"{}\",\"epoch\":{},\"lock_queue\":{}{}}}\n",
                             GoJson(*job), state, *epoch ? GoJson(**epoch) : "null", GoJson(*queue),
                             lease ? ",\"holder_lease\":" + GoJson(*lease) : std::string());
    return Status::Ok();
  }
  std::ostream& out = ctl.out();
  out << fmt::format("job:          {}\n", f.id);
  out << fmt::format("state:        {} ({})\n", state, job->key());
  out << fmt::format("spec:         {}\n", FirstLine(job->value()));
  out << fmt::format("epoch record: {}\n", *epoch ? (*epoch)->value() : "-");
  if (holder == nullptr) {
    out << "holder:       -\n";
  } else {
    out << fmt::format("holder:       lease {} token {} ({} waiting)\n", LeaseHex(holder->lease()),
                       holder->create_revision(), queue->kvs_size() - 1);
    if (lease) {
      out << fmt::format(
          "deadline:     {} ms on the cluster clock (remaining {} ms, max extension {} ms)\n",
          lease->deadline_cluster_ms(), lease->remaining_ttl_ms(), lease->max_extension_ms());
    } else {
      out << "deadline:     lease not found (expired or revoked)\n";
    }
  }
  return Status::Ok();
}

}  // namespace

void RegisterJobsCommands(CLI::App& app, Ctl& ctl) {
  auto f = std::make_shared<JobsFlags>();
  CLI::App* jobs =
      app.add_subcommand("jobs", "Epoch view of fenced jobs and the dead-letter queue");
  jobs->require_subcommand(1);
  jobs->add_option("--prefix", f->prefix, "Key prefix P of the job runner (P jobs/, P dlq/, ...)")
      ->capture_default_str();

  CLI::App* list = jobs->add_subcommand("list", "Lists the jobs: spec, epoch, last token, holder");
  list->add_option("--limit", f->limit, "Maximum number of jobs");
  list->callback(Runner(ctl, [&ctl, f] { return ListJobs(ctl, *f, false); }));

  CLI::App* show = jobs->add_subcommand("show", "Shows one job: state, epoch, holder and deadline");
  show->add_option("id", f->id, "Job ID")->required();
  show->callback(Runner(ctl, [&ctl, f] { return ShowJob(ctl, *f); }));

  CLI::App* dlq = jobs->add_subcommand("dlq", "Lists the dead-lettered jobs");
  dlq->add_option("--limit", f->limit, "Maximum number of jobs");
  dlq->callback(Runner(ctl, [&ctl, f] { return ListJobs(ctl, *f, true); }));
}

}  // namespace epoch::ctl
