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
    KvOp op;
    op.client_id = client_id;
    op.call_time = MonotonicNs();
    bool known = false, is_read = false, serializable = false;
    std::string error;  // why the outcome is unknown (or the read failed)
    if (dice < 35) {    // put
      op.input = KvInput::Put(key, value);
      out->written.push_back(value);
      auto r = c.Put(key, value);
      known = r.ok();
      if (!known) error = r.status().ToString();
    } else if (dice < 75) {  // get: linearizable, or serializable (recorded apart)
      is_read = true;
      serializable = dice >= 65;
      etcdserverpb::RangeRequest req;
      req.set_key(key);
      req.set_serializable(serializable);
      op.input = KvInput::Get(key);
      auto r = c.Range(req);
      if (r.ok()) {
        known = true;
        op.output = ReadOutput(*r);
        last_seen[key] =
            r->kvs_size() ? std::optional<std::string>(r->kvs(0).value()) : std::nullopt;
      } else {
        error = r.status().ToString();
      }
    } else if (dice < 93) {  // cas against the last value this client saw
      std::optional<std::string> expected = last_seen[key];
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
      op.input = KvInput::Cas(key, expected, value);
      out->written.push_back(value);
      auto r = c.Txn(txn);
      if (r.ok()) {
        known = true;
        op.output = KvOutput::Ok(r->succeeded());
        if (r->succeeded()) last_seen[key] = value;
      } else {
        error = r.status().ToString();
      }
    } else {  // delete
      etcdserverpb::DeleteRangeRequest req;
      req.set_key(key);
      op.input = KvInput::Delete(key);
      auto r = c.DeleteRange(req);
      if (r.ok()) {
        known = true;
        op.output = KvOutput::Ok(r->deleted() > 0);
      } else {
        error = r.status().ToString();
      }
    }
    if (known) {
      op.return_time = MonotonicNs();
      (serializable ? out->serializable_reads : out->ops).push_back(std::move(op));
      completed_.fetch_add(1);
      if (!is_read) completed_writes_.fetch_add(1);
    } else if (is_read) {
      ++out->read_fail;
    } else {
      op.return_time = lincheck::kNeverReturned;
      out->unknown_reasons[out->ops.size()] = std::move(error);
      out->ops.push_back(std::move(op));
      ++out->unknown;
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
  std::set<std::string> written;
  for (const Recorded& r : recorded_) {
    all.insert(all.end(), r.ops.begin(), r.ops.end());
    written.insert(r.written.begin(), r.written.end());
    report.unknown += r.unknown;
    report.read_fail += r.read_fail;
    report.serializable += r.serializable_reads.size();
  }
  report.ok = all.size() - report.unknown;
  lincheck::Budget b;
  b.time_limit = budget;
  report.lin = lincheck::Check(lincheck::KvModel{}, all, b);
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
  lincheck::KvModel model;
  struct Line {
    const KvOp* op;
    const std::string* reason;  // unknown outcome: the client's error
    bool serializable;
  };
  std::vector<Line> all;
  for (const Recorded& r : recorded_) {
    for (std::size_t i = 0; i < r.ops.size(); ++i) {
      auto it = r.unknown_reasons.find(i);
      all.push_back({&r.ops[i], it == r.unknown_reasons.end() ? nullptr : &it->second, false});
    }
    for (const KvOp& op : r.serializable_reads) all.push_back({&op, nullptr, true});
  }
  std::sort(all.begin(), all.end(),
            [](const Line& a, const Line& b) { return a.op->call_time < b.op->call_time; });
  std::string out;
  for (const Line& l : all) {
    bool never = l.op->return_time == lincheck::kNeverReturned;
    out += fmt::format("client={} call={} return={} {}{}{}\n", l.op->client_id, l.op->call_time,
                       never ? std::string("never") : std::to_string(l.op->return_time),
                       l.serializable ? "serializable " : "",
                       model.DescribeOperation(l.op->input, l.op->output, never),
                       l.reason ? " [" + *l.reason + "]" : std::string());
  }
  return out;
}

}  // namespace epoch::chaos
