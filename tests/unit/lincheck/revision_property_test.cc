// Property test for lincheck::CheckRevisions: histories generated from a reference etcd store
// (each operation takes effect at a point inside its interval; some writes have an unknown outcome
// and take effect or not) are always accepted. This guards the checker against false alarms,
// which the hand-written cases cannot cover broadly: concurrency, unknown-outcome writes and
// deletes of every shape, multi-key txns, range reads.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "rev_history_builder.h"

namespace epoch::lincheck {
namespace {

struct Stored {
  std::string value;
  std::int64_t create = 0, mod = 0, version = 0;
};

// The reference store: etcd's revision rules, written independently of the checker's replay.
class ReferenceStore {
 public:
  // Runs `in`; returns the output a client would see.
  RevOutput Run(const RevInput& in) {
    RevOutput out;
    if (in.kind == RevOpKind::kRange) {
      for (const auto& [k, s] : keys_) {
        if (InRange(k, in.key, in.range_end)) {
          out.kvs.push_back({k, s.value, s.create, s.mod, s.version});
        }
      }
      out.header_revision = revision_;
      return out;
    }
    bool holds = std::all_of(in.compares.begin(), in.compares.end(), [&](const RevCompare& c) {
      auto it = keys_.find(c.key);
      return c.value ? it != keys_.end() && it->second.value == *c.value : it == keys_.end();
    });
    out.succeeded = in.kind != RevOpKind::kTxn || holds;
    Write(out.succeeded ? in.success : in.failure, &out);
    out.header_revision = revision_;
    return out;
  }

 private:
  void Write(const std::vector<RevMutation>& ms, RevOutput* out) {
    std::int64_t rev = revision_ + 1;
    bool changed = false;
    for (const RevMutation& m : ms) {
      if (!m.is_delete) {
        Stored& s = keys_[m.key];
        s = Stored{m.value, s.version == 0 ? rev : s.create, rev, s.version + 1};
        changed = true;
        continue;
      }
      for (auto it = keys_.begin(); it != keys_.end();) {
        if (InRange(it->first, m.key, m.range_end)) {
          it = keys_.erase(it);
          ++out->deleted;
          changed = true;
        } else {
          ++it;
        }
      }
    }
    if (changed) revision_ = rev;
  }

  std::map<std::string, Stored> keys_;
  std::int64_t revision_ = 1;
};

struct Planned {
  RevOp op;
  std::int64_t point;  // when it takes effect
  bool skipped;        // an unknown-outcome write that never took effect
};

RevInput RandomInput(std::mt19937_64& rng, int serial) {
  const std::vector<std::string> keys = {"a", "b", "c", "d"};
  auto key = [&] { return keys[std::uniform_int_distribution<std::size_t>(0, 3)(rng)]; };
  auto value = [&](int i) { return fmt::format("v{}-{}", serial, i); };
  switch (std::uniform_int_distribution<int>(0, 7)(rng)) {
    case 0: return RevInput::Range(key());
    case 1: return RevInput::Range("a", "c");
    case 2: return RevInput::Range("a", kRangeToEnd, serial % 3 == 0);
    case 3: return RevInput::DeleteRange(key());
    case 4: return RevInput::DeleteRange("b", "d");
    case 5: {
      std::optional<std::string> expected;
      if (serial % 2 == 0) expected = fmt::format("v{}-0", serial / 2);
      std::string k = key();
      return RevInput::Txn({RevCompare{k, expected}}, {RevMutation::Put(k, value(0))},
                           {RevMutation::Delete(key())});
    }
    case 6: {  // etcd refuses a txn that puts one key twice
      std::string other = keys[std::uniform_int_distribution<std::size_t>(1, 3)(rng)];
      return RevInput::Txn({},
                           {RevMutation::Put("a", value(0)), RevMutation::Put(other, value(1))});
    }
    default: return RevInput::Put(key(), value(0));
  }
}

std::vector<RevOp> RandomHistory(std::uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<Planned> plan;
  for (int i = 0; i < n; ++i) {
    Planned p;
    p.op.client_id = static_cast<std::uint64_t>(i % 4);
    p.op.call_time = std::uniform_int_distribution<std::int64_t>(0, 40 * n)(rng);
    std::int64_t length = std::uniform_int_distribution<std::int64_t>(1, 120)(rng);
    p.op.return_time = p.op.call_time + length;
    p.point = p.op.call_time + std::uniform_int_distribution<std::int64_t>(0, length)(rng);
    p.op.input = RandomInput(rng, i);
    bool unknown =
        p.op.input.kind != RevOpKind::kRange && std::uniform_int_distribution<int>(0, 5)(rng) == 0;
    p.skipped = unknown && std::uniform_int_distribution<int>(0, 1)(rng) == 0;
    if (unknown) p.op.return_time = kNeverReturned;
    plan.push_back(std::move(p));
  }
  std::stable_sort(plan.begin(), plan.end(),
                   [](const Planned& a, const Planned& b) { return a.point < b.point; });
  ReferenceStore store;
  std::vector<RevOp> history;
  for (Planned& p : plan) {
    if (!p.skipped) p.op.output = store.Run(p.op.input);
    history.push_back(std::move(p.op));
  }
  return history;
}

TEST_CASE("revisions: histories of a reference store are accepted", "[lincheck][revision]") {
  RevisionCheckOptions options;
  options.start_revision = 1;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    std::vector<RevOp> history = RandomHistory(seed, 40);
    RevisionCheckResult r = CheckRevisions(history, options);
    INFO("seed " << seed << "\n" << r.Describe());
    REQUIRE(r.Ok());
  }
}

}  // namespace
}  // namespace epoch::lincheck
