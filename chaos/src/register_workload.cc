#include "epoch/chaos/register_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "epoch/client/client.h"
#include "epoch/lincheck/checker.h"

namespace epoch::chaos {
namespace {

using lincheck::KvInput;
using lincheck::KvOutput;

std::vector<std::string> Rotated(std::vector<std::string> endpoints, int by) {
  if (!endpoints.empty()) {
    std::rotate(endpoints.begin(),
                endpoints.begin() + static_cast<long>(by % static_cast<int>(endpoints.size())),
                endpoints.end());
  }
  return endpoints;
}

KvOutput ReadOutput(const etcdserverpb::RangeResponse& r) {
  if (r.kvs_size() == 0) return KvOutput::Absent();
  return KvOutput::Value(r.kvs(0).value(), r.kvs(0).version());
}

// One operation as both checkers see it: `op` for the linearizability checker (KvModel), `rev`
// with the revisions the server returned for the revision checker.
struct Attempt {
  KvOp op;
  RevOp rev;
  bool known = false;  // the outcome is known (for a read: it succeeded)
  bool is_read = false;
  bool serializable = false;
  bool group = false;  // a group operation: in `rev` only
  std::string error;   // why the outcome is unknown (or the read failed)
};

lincheck::RevOutput Header(const etcdserverpb::ResponseHeader& h) {
  lincheck::RevOutput out;
  out.header_revision = h.revision();
  return out;
}

lincheck::RevOutput RangeOutput(const etcdserverpb::RangeResponse& r) {
  lincheck::RevOutput out = Header(r.header());
  for (const mvccpb::KeyValue& kv : r.kvs()) {
    out.kvs.push_back(
        {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.version()});
  }
  return out;
}

void DoPut(client::Client& c, const std::string& key, const std::string& value, Attempt* a) {
  a->op.input = KvInput::Put(key, value);
  a->rev.input = lincheck::RevInput::Put(key, value);
  auto r = c.Put(key, value);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->rev.output = Header(r->header());
}

void DoGet(client::Client& c, const std::string& key, bool serializable, Attempt* a) {
  a->is_read = true;
  a->serializable = serializable;
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_serializable(serializable);
  a->op.input = KvInput::Get(key);
  a->rev.input = lincheck::RevInput::Range(key, {}, serializable);
  auto r = c.Range(req);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->op.output = ReadOutput(*r);
  a->rev.output = RangeOutput(*r);
}

// A compare-and-set: put `value` if the key holds `expected` (nullopt: if it does not exist).
void DoCas(client::Client& c, const std::string& key, const std::optional<std::string>& expected,
           const std::string& value, Attempt* a) {
  etcdserverpb::TxnRequest txn;
  etcdserverpb::Compare* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  if (expected) {
    cmp->set_target(etcdserverpb::Compare::VALUE);
    cmp->set_value(*expected);
  } else {
    cmp->set_target(etcdserverpb::Compare::CREATE);
    cmp->set_create_revision(0);
  }
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  a->op.input = KvInput::Cas(key, expected, value);
  a->rev.input = lincheck::RevInput::Txn({lincheck::RevCompare{key, expected}},
                                         {lincheck::RevMutation::Put(key, value)});
  auto r = c.Txn(txn);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->op.output = KvOutput::Ok(r->succeeded());
  a->rev.output = Header(r->header());
  a->rev.output.succeeded = r->succeeded();
}

void DoDelete(client::Client& c, const std::string& key, Attempt* a) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(key);
  a->op.input = KvInput::Delete(key);
  a->rev.input = lincheck::RevInput::DeleteRange(key);
  auto r = c.DeleteRange(req);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->op.output = KvOutput::Ok(r->deleted() > 0);
  a->rev.output = Header(r->header());
  a->rev.output.deleted = r->deleted();
}

// Group operations: on the keys "<group>0".."<group>3", recorded for the revision checker only
// (the KvModel cannot express them). A txn puts two of the keys at one revision; a delete removes
// the whole group; a range reads it whole.
void DoGroupTxn(client::Client& c, const std::string& k1, const std::string& k2,
                const std::string& value, Attempt* a) {
  etcdserverpb::TxnRequest txn;
  for (const std::string* k : {&k1, &k2}) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(*k);
    put->set_value(value + *k);
  }
  a->rev.input = lincheck::RevInput::Txn(
      {}, {lincheck::RevMutation::Put(k1, value + k1), lincheck::RevMutation::Put(k2, value + k2)});
  auto r = c.Txn(txn);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->rev.output = Header(r->header());
  a->rev.output.succeeded = r->succeeded();
}

void DoGroupDelete(client::Client& c, const std::string& group, Attempt* a) {
  etcdserverpb::DeleteRangeRequest req;
  req.set_key(group);
  req.set_range_end(client::PrefixRangeEnd(group));
  a->rev.input = lincheck::RevInput::DeleteRange(group, req.range_end());
  auto r = c.DeleteRange(req);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->rev.output = Header(r->header());
  a->rev.output.deleted = r->deleted();
}

void DoGroupRange(client::Client& c, const std::string& group, Attempt* a) {
  a->is_read = true;
  etcdserverpb::RangeRequest req;
  req.set_key(group);
  req.set_range_end(client::PrefixRangeEnd(group));
  a->rev.input = lincheck::RevInput::Range(group, req.range_end());
  auto r = c.Range(req);
  a->known = r.ok();
  if (!a->known) {
    a->error = r.status().ToString();
    return;
  }
  a->rev.output = RangeOutput(*r);
}

void DoGroupOp(client::Client& c, const std::string& group, const std::string& value,
               std::mt19937_64& rng, Attempt* a) {
  a->group = true;
  int dice = std::uniform_int_distribution<int>(0, 9)(rng);
  if (dice < 4) {
    int i = std::uniform_int_distribution<int>(0, 3)(rng);
    int j = (i + std::uniform_int_distribution<int>(1, 3)(rng)) % 4;
    DoGroupTxn(c, fmt::format("{}{}", group, i), fmt::format("{}{}", group, j), value, a);
  } else if (dice < 6) {
    DoGroupDelete(c, group, a);
  } else {
    DoGroupRange(c, group, a);
  }
}

}  // namespace

std::int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RegisterWorkload::Start() {
  stop_ = false;
  start_ns_ = MonotonicNs();
  recorded_.assign(static_cast<std::size_t>(options_.clients), Recorded{});
  for (int i = 0; i < options_.clients; ++i) {
    threads_.emplace_back([this, i] { RunClient(i, &recorded_[static_cast<std::size_t>(i)]); });
  }
}

void RegisterWorkload::Stop() {
  stop_ = true;
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void RegisterWorkload::RunClient(int index, Recorded* out) {
  client::ClientOptions copts;
  copts.endpoints = Rotated(options_.endpoints, index);
  copts.call_timeout = options_.op_timeout;
  copts.dial_timeout = std::chrono::milliseconds(200);
  copts.retry = {std::chrono::milliseconds(10), std::chrono::milliseconds(200), 6};
  copts.seed = options_.seed * 31 + static_cast<std::uint64_t>(index);
  // Chaos clusters with client TLS serve self-signed --auto-tls certificates (https:// endpoints).
  copts.tls.insecure_skip_verify = true;
  auto created = client::Client::Create(copts);
  if (!created.ok()) {
    fmt::print(stderr, "register client {}: {}\n", index, created.status().ToString());
    return;
  }
  client::Client& c = **created;
  std::mt19937_64 rng(copts.seed);
  std::map<std::string, std::optional<std::string>> last_seen;
  std::uint64_t seq = 0;
  const auto client_id = static_cast<std::uint64_t>(index);
  while (!stop_.load()) {
    std::int64_t generation =
        (MonotonicNs() - start_ns_) / std::chrono::nanoseconds(options_.key_generation).count();
    std::string key = fmt::format("{}g{}-k{:02}", options_.prefix, generation,
                                  std::uniform_int_distribution<int>(0, options_.keys - 1)(rng));

    std::string value = fmt::format("c{}-{}", index, ++seq);
    int dice = std::uniform_int_distribution<int>(0, 99)(rng);
    Attempt a;
    a.op.client_id = a.rev.client_id = client_id;
    a.op.call_time = a.rev.call_time = MonotonicNs();
    if (std::uniform_int_distribution<int>(0, 99)(rng) < options_.group_percent) {
      DoGroupOp(c, fmt::format("{}g{}-m", options_.prefix, generation), value, rng, &a);
    } else if (dice < 35) {
      out->written.push_back(value);
      DoPut(c, key, value, &a);
    } else if (dice < 75) {  // linearizable, or serializable (recorded apart)
      DoGet(c, key, dice >= 65, &a);
      if (a.known) {
        last_seen[key] = a.op.output.found ? std::optional(a.op.output.value) : std::nullopt;
      }
    } else if (dice < 93) {  // cas against the last value this client saw
      out->written.push_back(value);
      DoCas(c, key, last_seen[key], value, &a);
      if (a.known && a.op.output.ok == true) last_seen[key] = value;
    } else {
      DoDelete(c, key, &a);
    }
    bool known = a.known;
    if (known) {
      a.op.return_time = a.rev.return_time = MonotonicNs();
      if (!a.group) {
        (a.serializable ? out->serializable_reads : out->ops).push_back(std::move(a.op));
      }
      out->rev_ops.push_back(std::move(a.rev));
      completed_.fetch_add(1);
      if (!a.is_read) completed_writes_.fetch_add(1);
    } else if (a.is_read) {
      ++out->read_fail;
    } else {
      a.op.return_time = a.rev.return_time = lincheck::kNeverReturned;
      out->unknown_reasons[out->rev_ops.size()] = std::move(a.error);
      out->rev_ops.push_back(std::move(a.rev));
      if (!a.group) {
        out->ops.push_back(std::move(a.op));
        ++out->unknown;
      }
    }
    // Pacing of the load, not a wait for a condition. After a failure the client backs off like a
    // real one: right after a leader dies, followers can fail forwarded writes at once ("request
    // timed out, possibly due to connection lost"), and a client looping on that floods one key
    // with unknown-outcome writes, which makes the linearizability search exponential.
    std::this_thread::sleep_for(known ? options_.pace : options_.pace_after_failure);
  }
}

RegisterReport RegisterWorkload::Check(std::chrono::milliseconds budget) const {
  RegisterReport report;
  std::vector<KvOp> all;
  std::vector<RevOp> all_rev;
  std::set<std::string> written;
  for (const Recorded& r : recorded_) {
    all.insert(all.end(), r.ops.begin(), r.ops.end());
    all_rev.insert(all_rev.end(), r.rev_ops.begin(), r.rev_ops.end());
    written.insert(r.written.begin(), r.written.end());
    report.unknown += r.unknown;
    report.read_fail += r.read_fail;
    report.serializable += r.serializable_reads.size();
  }
  report.ok = all.size() - report.unknown;
  lincheck::Budget b;
  b.time_limit = budget;
  report.lin = lincheck::Check(lincheck::KvModel{}, all, b);
  // The marker, the lock workload and the recovery probes write too, to keys this history never
  // touches: their revisions fall between ours, so the gap rule cannot apply.
  lincheck::RevisionCheckOptions rev_options;
  rev_options.other_writers = true;
  report.rev = lincheck::CheckRevisions(all_rev, rev_options);
  for (const Recorded& r : recorded_) {
    for (const KvOp& op : r.serializable_reads) {
      if (op.output.found && !written.count(op.output.value)) {
        report.serializable_violation =
            fmt::format("serializable read of {} by client {} returned '{}', which no client wrote",
                        op.input.key, op.client_id, op.output.value);
      }
    }
  }
  return report;
}

std::string RegisterWorkload::Dump() const {
  struct Line {
    const RevOp* op;
    const std::string* reason;  // unknown outcome: the client's error
  };
  std::vector<Line> all;
  for (const Recorded& r : recorded_) {
    for (std::size_t i = 0; i < r.rev_ops.size(); ++i) {
      auto it = r.unknown_reasons.find(i);
      all.push_back({&r.rev_ops[i], it == r.unknown_reasons.end() ? nullptr : &it->second});
    }
  }
  std::sort(all.begin(), all.end(),
            [](const Line& a, const Line& b) { return a.op->call_time < b.op->call_time; });
  std::string out;
  for (const Line& l : all) {
    out += fmt::format("{}{}\n", lincheck::DescribeRevOp(*l.op),
                       l.reason ? " [" + *l.reason + "]" : std::string());
  }
  return out;
}

}  // namespace epoch::chaos
