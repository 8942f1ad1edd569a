// Randomized model test: thousands of random Put/DeleteRange/Txn/Range/Compact/lease operations
// applied to KvStore (RocksDB, history index, batch overlay, compaction) and to a tiny in-memory
// model of etcd's semantics that keeps a full copy of the key space for every revision. Every
// response, error and event must be identical. A failure prints its seed; rerun one seed with
//   EPOCH_MODEL_SEED=<seed> state_tests "kv store matches the in-memory model"
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "epoch/etcd_errors.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)
using google::protobuf::util::MessageDifferencer;
using KV = mvccpb::KeyValue;
using State = std::map<std::string, KV>;
using RR = pb::RangeRequest;

const std::string kFromKey(1, '\0');

bool InRange(const std::string& key, const std::string& end, const std::string& k) {
  if (end.empty()) return k == key;
  if (end == kFromKey) return k >= key;
  return key <= k && k < end;
}

// ---------------------------------------------------------------------------------------------
// The model: etcd semantics over std::map, one full State per revision.

struct Writer {
  State st;
  std::int64_t base = 0;
  bool changed = false;
  std::vector<mvccpb::Event> events;
  [[nodiscard]] std::int64_t NewRev() const { return base + 1; }
  [[nodiscard]] std::int64_t Cur() const { return changed ? base + 1 : base; }
};

class Model {
 public:
  std::int64_t rev = 1;
  std::int64_t compact = -1;
  State cur;
  std::map<std::int64_t, State> states{{1, {}}};
  std::set<std::int64_t> leases;

  static pb::RangeResponse RangeOn(const State& st, const RR& r, std::int64_t header_rev) {
    std::vector<KV> all;
    for (const auto& [k, kv] : st) {
      if (InRange(r.key(), r.range_end(), k)) all.push_back(kv);
    }
    pb::RangeResponse resp;
    resp.mutable_header()->set_revision(header_rev);
    resp.set_count(static_cast<std::int64_t>(all.size()));
    if (r.count_only()) return resp;
    auto drop = [&](auto pred) {
      all.erase(std::remove_if(all.begin(), all.end(), pred), all.end());
    };
    if (r.max_mod_revision() != 0)
      drop([&](const KV& kv) { return kv.mod_revision() > r.max_mod_revision(); });
    if (r.min_mod_revision() != 0)
      drop([&](const KV& kv) { return kv.mod_revision() < r.min_mod_revision(); });
    if (r.max_create_revision() != 0)
      drop([&](const KV& kv) { return kv.create_revision() > r.max_create_revision(); });
    if (r.min_create_revision() != 0)
      drop([&](const KV& kv) { return kv.create_revision() < r.min_create_revision(); });
    auto order = r.sort_order();
    if (order == RR::NONE && r.sort_target() != RR::KEY) order = RR::ASCEND;
    auto field = [&](const KV& kv) -> std::string {
      // Encodes the sort target so that string order is the target's order.
      char buf[32];
      switch (r.sort_target()) {
        case RR::KEY: return kv.key();
        case RR::VALUE: return kv.value();
        case RR::VERSION:
          std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(kv.version()));
          return buf;
        case RR::CREATE:
          std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(kv.create_revision()));
          return buf;
        case RR::MOD:
          std::snprintf(buf, sizeof(buf), "%020lld", static_cast<long long>(kv.mod_revision()));
          return buf;
        default: return "";
      }
    };
    if (order == RR::ASCEND) {
      std::stable_sort(all.begin(), all.end(),
                       [&](const KV& a, const KV& b) { return field(a) < field(b); });
    } else if (order == RR::DESCEND) {
      std::stable_sort(all.begin(), all.end(),
                       [&](const KV& a, const KV& b) { return field(a) > field(b); });
    }
    if (r.limit() > 0 && static_cast<std::int64_t>(all.size()) > r.limit()) {
      all.resize(static_cast<std::size_t>(r.limit()));
      resp.set_more(true);
    }
    for (KV& kv : all) {
      if (r.keys_only()) kv.clear_value();
      *resp.add_kvs() = kv;
    }
    return resp;
  }

  std::string Range(const RR& r, pb::RangeResponse* out) const {
    if (r.revision() > rev) return std::string(epoch::etcd_errors::kFutureRev.message);
    const std::int64_t at = r.revision() <= 0 ? rev : r.revision();
    if (at < compact) return std::string(epoch::etcd_errors::kCompacted.message);
    *out = RangeOn(states.at(at), r, rev);
    return "";
  }

  std::string CheckPut(const State& st, const pb::PutRequest& p) const {
    if (p.lease() != 0 && !leases.contains(p.lease()))
      return std::string(epoch::etcd_errors::kLeaseNotFound.message);
    if ((p.ignore_value() || p.ignore_lease()) && !st.contains(p.key()))
      return std::string(epoch::etcd_errors::kKeyNotFound.message);
    return "";
  }

  static pb::PutResponse PutOn(Writer& w, const pb::PutRequest& p) {
    pb::PutResponse resp;
    const KV* prev = w.st.contains(p.key()) ? &w.st.at(p.key()) : nullptr;
    KV kv;
    kv.set_key(p.key());
    kv.set_value(p.ignore_value() ? prev->value() : p.value());
    kv.set_lease(p.ignore_lease() ? prev->lease() : p.lease());
    kv.set_create_revision(prev != nullptr ? prev->create_revision() : w.NewRev());
    kv.set_mod_revision(w.NewRev());
    kv.set_version(prev != nullptr ? prev->version() + 1 : 1);
    mvccpb::Event ev;
    ev.set_type(mvccpb::Event::PUT);
    *ev.mutable_kv() = kv;
    if (prev != nullptr) {
      *ev.mutable_prev_kv() = *prev;
      if (p.prev_kv()) *resp.mutable_prev_kv() = *prev;
    }
    w.events.push_back(ev);
    w.st[p.key()] = kv;
    w.changed = true;
    resp.mutable_header()->set_revision(w.NewRev());
    return resp;
  }

  static pb::DeleteRangeResponse DeleteOn(Writer& w, const std::string& key, const std::string& end,
                                          bool prev_kv) {
    pb::DeleteRangeResponse resp;
    std::vector<std::string> doomed;
    for (const auto& [k, kv] : w.st) {
      if (InRange(key, end, k)) doomed.push_back(k);
    }
    for (const std::string& k : doomed) {
      mvccpb::Event ev;
      ev.set_type(mvccpb::Event::DELETE);
      ev.mutable_kv()->set_key(k);
      ev.mutable_kv()->set_mod_revision(w.NewRev());
      *ev.mutable_prev_kv() = w.st.at(k);
      if (prev_kv) *resp.add_prev_kvs() = w.st.at(k);
      w.events.push_back(ev);
      w.st.erase(k);
      w.changed = true;
    }
    resp.set_deleted(static_cast<std::int64_t>(doomed.size()));
    resp.mutable_header()->set_revision(w.Cur());
    return resp;
  }

  static bool CompareHolds(const State& pre, const pb::Compare& c) {
    std::vector<KV> kvs;
    for (const auto& [k, kv] : pre) {
      if (InRange(c.key(), c.range_end(), k)) kvs.push_back(kv);
    }
    if (kvs.empty()) {
      if (c.target() == pb::Compare::VALUE) return false;
      kvs.emplace_back();
    }
    for (const KV& kv : kvs) {
      int cmp = 0;
      auto three = [](auto a, auto b) { return a < b ? -1 : (b < a ? 1 : 0); };
      switch (c.target()) {
        case pb::Compare::VALUE: cmp = three(kv.value(), c.value()); break;
        case pb::Compare::VERSION: cmp = three(kv.version(), c.version()); break;
        case pb::Compare::CREATE: cmp = three(kv.create_revision(), c.create_revision()); break;
        case pb::Compare::MOD: cmp = three(kv.mod_revision(), c.mod_revision()); break;
        case pb::Compare::LEASE: cmp = three(kv.lease(), c.lease()); break;
        default: break;
      }
      bool ok = true;
      switch (c.result()) {
        case pb::Compare::EQUAL: ok = cmp == 0; break;
        case pb::Compare::NOT_EQUAL: ok = cmp != 0; break;
        case pb::Compare::GREATER: ok = cmp > 0; break;
        case pb::Compare::LESS: ok = cmp < 0; break;
        default: break;
      }
      if (!ok) return false;
    }
    return true;
  }

  // Returns an error, or executes `t` into `w` (compares on `pre`, the state before the txn).
  std::string ExecTxn(Writer& w, const State& pre, const pb::TxnRequest& t,
                      pb::TxnResponse* out) const {
    bool ok = true;
    for (const auto& c : t.compare()) ok = ok && CompareHolds(pre, c);
    out->set_succeeded(ok);
    out->mutable_header();
    for (const pb::RequestOp& op : ok ? t.success() : t.failure()) {
      pb::ResponseOp* r = out->add_responses();
      switch (op.request_case()) {
        case pb::RequestOp::kRequestRange:
          *r->mutable_response_range() = RangeOn(w.st, op.request_range(), w.Cur());
          break;
        case pb::RequestOp::kRequestPut: {
          std::string err = CheckPut(pre, op.request_put());
          if (!err.empty()) return err;
          *r->mutable_response_put() = PutOn(w, op.request_put());
          break;
        }
        case pb::RequestOp::kRequestDeleteRange: {
          const auto& d = op.request_delete_range();
          *r->mutable_response_delete_range() = DeleteOn(w, d.key(), d.range_end(), d.prev_kv());
          break;
        }
        case pb::RequestOp::kRequestTxn: {
          std::string err = ExecTxn(w, pre, op.request_txn(), r->mutable_response_txn());
          if (!err.empty()) return err;
          break;
        }
        default: return "bad op";
      }
    }
    return "";
  }

  Writer Begin() const { return Writer{cur, rev, false, {}}; }
  void Commit(Writer& w) {
    cur = std::move(w.st);
    if (w.changed) {
      ++rev;
      states[rev] = cur;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Random operations.

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed) {}
  int Int(int n) { return static_cast<int>(rng_() % static_cast<std::uint64_t>(n)); }
  bool Chance(int percent) { return Int(100) < percent; }
  std::string Key() {
    static const char* kKeys[] = {"a", "b", "bb", "c", "d", "e", "f"};
    if (Chance(5)) return std::string("b\0", 2);
    return kKeys[Int(7)];
  }
  std::string Value() { return std::string(1 + Int(3), static_cast<char>('p' + Int(4))); }
  // range_end: single key, a real range, or from-key.
  std::string End(const std::string& key) {
    const int k = Int(10);
    if (k < 4) return "";
    if (k < 6) return kFromKey;
    std::string e = Key();
    return e == key ? e + "z" : e;  // sometimes inverted: must be empty, not an error
  }
  std::int64_t Lease(const std::set<std::int64_t>& leases) {
    if (Chance(60) || leases.empty()) return Chance(5) ? 99 : 0;
    auto it = leases.begin();
    std::advance(it, Int(static_cast<int>(leases.size())));
    return *it;
  }

  pb::PutRequest Put(const std::set<std::int64_t>& leases) {
    pb::PutRequest p = PutReq(Key(), Value(), Lease(leases));
    p.set_prev_kv(Chance(50));
    if (Chance(8)) {
      p.set_ignore_value(true);
      p.clear_value();
    }
    if (Chance(8)) {
      p.set_ignore_lease(true);
      p.set_lease(0);
    }
    return p;
  }

  RR Range(const Model& m, bool in_txn) {
    RR r = RangeReq(Key());
    r.set_range_end(End(r.key()));
    if (!in_txn && Chance(40))
      r.set_revision(std::max<std::int64_t>(0, m.compact - 1) +
                     Int(static_cast<int>(m.rev - m.compact + 3)));
    if (Chance(30)) r.set_limit(1 + Int(3));
    if (Chance(30)) r.set_sort_order(static_cast<RR::SortOrder>(Int(3)));
    if (Chance(30)) r.set_sort_target(static_cast<RR::SortTarget>(Int(5)));
    if (Chance(10)) r.set_min_mod_revision(1 + Int(static_cast<int>(m.rev)));
    if (Chance(10)) r.set_max_mod_revision(1 + Int(static_cast<int>(m.rev)));
    if (Chance(10)) r.set_min_create_revision(1 + Int(static_cast<int>(m.rev)));
    if (Chance(10)) r.set_max_create_revision(1 + Int(static_cast<int>(m.rev)));
    r.set_keys_only(Chance(10));
    r.set_count_only(Chance(10));
    return r;
  }

  pb::Compare Compare(const Model& m) {
    pb::Compare c = Cmp(Key(), static_cast<pb::Compare::CompareTarget>(Int(5)),
                        static_cast<pb::Compare::CompareResult>(Int(4)));
    if (Chance(15)) c.set_range_end(End(c.key()));
    const std::int64_t n = Int(static_cast<int>(m.rev) + 2);
    switch (c.target()) {
      case pb::Compare::VALUE: c.set_value(Value()); break;
      case pb::Compare::VERSION: c.set_version(Int(4)); break;
      case pb::Compare::CREATE: c.set_create_revision(n); break;
      case pb::Compare::MOD: c.set_mod_revision(n); break;
      case pb::Compare::LEASE: c.set_lease(Int(3)); break;
      default: break;
    }
    return c;
  }

  // Writes at this level use distinct keys outside "z...", so the txn passes the duplicate
  // check; the nested txn (one level) writes only "z..." keys, distinct from each other.
  pb::TxnRequest Txn(const Model& m, bool nested) {
    pb::TxnRequest t;
    for (int i = Int(3); i > 0; --i) *t.add_compare() = Compare(m);
    std::set<std::string> used;
    for (auto* branch : {t.mutable_success(), t.mutable_failure()}) {
      used.clear();
      bool has_delete = false;
      for (int i = Int(4); i > 0; --i) {
        const int kind = Int(10);
        if (kind < 3) {
          *branch->Add()->mutable_request_range() = Range(m, true);
        } else if (kind < 6 && !has_delete) {
          pb::PutRequest p = Put(m.leases);
          if (nested) p.set_key("z" + std::to_string(nested_keys_++));
          if (used.insert(p.key()).second) *branch->Add()->mutable_request_put() = p;
        } else if (kind < 8 && !nested && used.empty()) {
          // A delete only in a branch without puts (a put under a delete is a duplicate).
          auto* d = branch->Add()->mutable_request_delete_range();
          d->set_key(Key());
          d->set_range_end(End(d->key()));
          d->set_prev_kv(Chance(50));
          has_delete = true;
        } else if (!nested && Chance(50)) {
          *branch->Add()->mutable_request_txn() = Txn(m, true);
        }
      }
    }
    return t;
  }

 private:
  std::mt19937_64 rng_;
  int nested_keys_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Driver.

template <typename M>
void CheckSame(const M& expected, const M& actual) {
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  const bool same = d.Compare(expected, actual);
  INFO("expected: " << expected.ShortDebugString() << "\nactual:   " << actual.ShortDebugString()
                    << "\ndiff: " << diff);
  CHECK(same);
}

void CheckEvents(const std::vector<mvccpb::Event>& expected,
                 const std::vector<mvccpb::Event>& actual) {
  REQUIRE(expected.size() == actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) CheckSame(expected[i], actual[i]);
}

void Step(Gen& g, Model& m, TestStore& s) {
  const int kind = g.Int(100);
  v1::InternalRequest req;
  if (kind < 28) {  // Put
    *req.mutable_put() = g.Put(m.leases);
    Writer w = m.Begin();
    std::string err = m.CheckPut(m.cur, req.put());
    ApplyResult r = s.Apply(req);
    CHECK(r.status.message() == (err.empty() ? std::string() : err));
    if (!err.empty()) return;
    pb::PutResponse expected = Model::PutOn(w, req.put());
    CheckSame(expected, r.response.put());
    CheckEvents(w.events, r.events);
    m.Commit(w);
  } else if (kind < 38) {  // DeleteRange
    auto* d = req.mutable_delete_range();
    d->set_key(g.Key());
    d->set_range_end(g.End(d->key()));
    d->set_prev_kv(g.Chance(50));
    Writer w = m.Begin();
    pb::DeleteRangeResponse expected = Model::DeleteOn(w, d->key(), d->range_end(), d->prev_kv());
    ApplyResult r = s.Apply(req);
    REQUIRE(r.status.ok());
    CheckSame(expected, r.response.delete_range());
    CheckEvents(w.events, r.events);
    m.Commit(w);
  } else if (kind < 58) {  // Txn
    *req.mutable_txn() = g.Txn(m, false);
    INFO("txn: " << req.txn().ShortDebugString());
    Writer w = m.Begin();
    pb::TxnResponse expected;
    std::string err = m.ExecTxn(w, m.cur, req.txn(), &expected);
    ApplyResult r = s.Apply(req);
    CHECK(r.status.message() == err);
    if (!err.empty()) return;
    expected.mutable_header()->set_revision(w.Cur());
    CheckSame(expected, r.response.txn());
    CheckEvents(w.events, r.events);
    m.Commit(w);
  } else if (kind < 90) {  // Range
    RR rr = g.Range(m, false);
    INFO("range: " << rr.ShortDebugString());
    pb::RangeResponse expected;
    std::string err = m.Range(rr, &expected);
    auto actual = s->Range(rr);
    CHECK(actual.status().message() == err);
    if (err.empty() && actual.ok()) CheckSame(expected, *actual);
  } else if (kind < 93) {  // Compact
    const std::int64_t target = m.compact + g.Int(static_cast<int>(m.rev - m.compact + 2));
    req.mutable_compaction()->set_revision(target);
    ApplyResult r = s.Apply(req);
    std::string err;
    if (target <= m.compact)
      err = std::string(epoch::etcd_errors::kCompacted.message);
    else if (target > m.rev)
      err = std::string(epoch::etcd_errors::kFutureRev.message);
    CHECK(r.status.message() == err);
    if (err.empty()) m.compact = target;
  } else if (kind < 97) {  // LeaseGrant
    const std::int64_t id = 1 + g.Int(4);
    req.mutable_lease_grant()->set_id(id);
    req.mutable_lease_grant()->set_ttl_ms(1000);
    ApplyResult r = s.Apply(req);
    CHECK(r.status.message() ==
          (m.leases.contains(id) ? std::string(epoch::etcd_errors::kLeaseExist.message) : ""));
    m.leases.insert(id);
  } else {  // LeaseRevoke
    const std::int64_t id = 1 + g.Int(4);
    req.mutable_lease_revoke()->set_id(id);
    ApplyResult r = s.Apply(req);
    if (!m.leases.contains(id)) {
      CHECK(r.status.message() == epoch::etcd_errors::kLeaseNotFound.message);
      return;
    }
    REQUIRE(r.status.ok());
    m.leases.erase(id);
    Writer w = m.Begin();
    std::vector<std::string> keys;
    for (const auto& [k, kv] : w.st) {
      if (kv.lease() == id) keys.push_back(k);
    }
    for (const std::string& k : keys) Model::DeleteOn(w, k, "", false);
    CheckEvents(w.events, r.events);
    m.Commit(w);
  }
  CHECK(s->CurrentRevision() == Revision(m.rev));
}

// Every readable revision of the store equals the model's copy.
void CheckAllRevisions(const Model& m, TestStore& s) {
  for (std::int64_t at = std::max<std::int64_t>(1, m.compact); at <= m.rev; ++at) {
    RR all = RangeReq(kFromKey, kFromKey);
    all.set_revision(at);
    pb::RangeResponse expected;
    REQUIRE(m.Range(all, &expected).empty());
    CheckSame(expected, s.Range(all));
  }
}

TEST_CASE("kv store matches the in-memory model", "[server][model]") {
  std::vector<std::uint64_t> seeds = {1, 2, 3, 4, 5, 6, 7, 8};
  if (const char* one = std::getenv("EPOCH_MODEL_SEED")) seeds = {std::strtoull(one, nullptr, 10)};
  constexpr int kSteps = 500;
  for (std::uint64_t seed : seeds) {
    INFO("seed " << seed << " (rerun: EPOCH_MODEL_SEED=" << seed << ")");
    TempDir dir;
    TestStore s(dir.path());
    Model m;
    Gen g(seed);
    for (int i = 0; i < kSteps; ++i) {
      INFO("step " << i);
      Step(g, m, s);
      if (i == kSteps / 2) {
        s.Reopen();  // state and history survive a restart
        CheckAllRevisions(m, s);
      }
    }
    CheckAllRevisions(m, s);
  }
}

}  // namespace
}  // namespace epoch::server
