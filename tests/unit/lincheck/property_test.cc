// Property tests for lincheck::Check: histories produced by a sequential execution with random
// overlapping intervals are always accepted; corrupted ones are mostly rejected; on tiny
// histories the verdict equals that of an independent brute-force search over all orders.
#include <catch2/catch.hpp>
#include <random>

#include "epoch/lincheck/checker.h"
#include "epoch/lincheck/kv_model.h"

namespace epoch::lincheck {
namespace {

using Op = KvModel::Op;
using Rng = std::mt19937_64;

std::int64_t Uniform(Rng& rng, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// Applies `in` to a true state, returning the output a correct server would give.
KvOutput Execute(std::map<std::string, KvState>& db, const KvInput& in) {
  KvState& s = db[in.key];
  KvOutput out;
  switch (in.kind) {
    case KvOpKind::kGet:
      out = s.exists ? KvOutput::Value(s.value, s.version) : KvOutput::Absent();
      break;
    case KvOpKind::kPut: s = {true, in.value, s.exists ? s.version + 1 : 1}; break;
    case KvOpKind::kCas: {
      bool match = in.expected ? (s.exists && s.value == *in.expected) : !s.exists;
      if (match) s = {true, in.value, s.exists ? s.version + 1 : 1};
      out = KvOutput::Ok(match);
      break;
    }
    case KvOpKind::kDelete:
      out = KvOutput::Ok(s.exists);
      s = {};
      break;
  }
  return out;
}

struct GenParams {
  int ops = 10;
  int keys = 1;
  std::int64_t max_half_width = 30;  // linearization points are 10 apart
  int unknown_percent = 10;
};

// A random input on a random key; cas expects a recent value of the key (or absence).
KvInput RandomInput(Rng& rng, const GenParams& p, int i,
                    const std::map<std::string, std::vector<std::string>>& written) {
  std::string key = "k" + std::to_string(Uniform(rng, 0, p.keys - 1));
  std::string value = "v" + std::to_string(i);
  switch (Uniform(rng, 0, 5)) {
    case 0:
    case 1: return KvInput::Put(key, value);
    case 2: {
      auto it = written.find(key);
      if (it == written.end() || Uniform(rng, 0, 3) == 0)
        return KvInput::Cas(key, std::nullopt, value);
      return KvInput::Cas(key, it->second[Uniform(rng, 0, it->second.size() - 1)], value);
    }
    case 3: return KvInput::Delete(key);
    default: return KvInput::Get(key);
  }
}

// Runs ops sequentially at points 10, 20, ... and gives each an interval around its point. An
// op with unknown outcome either took effect at its point or never did.
std::vector<Op> GenerateLinearizable(Rng& rng, const GenParams& p) {
  std::map<std::string, KvState> db;
  std::map<std::string, std::vector<std::string>> written;
  std::vector<Op> ops;
  for (int i = 0; i < p.ops; ++i) {
    std::int64_t point = 10 * (i + 1);
    KvInput in = RandomInput(rng, p, i, written);
    if (in.kind == KvOpKind::kPut || in.kind == KvOpKind::kCas) written[in.key].push_back(in.value);
    Op op{static_cast<std::uint64_t>(Uniform(rng, 0, 4)),
          point - Uniform(rng, 0, p.max_half_width),
          point + Uniform(rng, 0, p.max_half_width),
          in,
          {}};
    if (Uniform(rng, 0, 99) < p.unknown_percent) {
      op.return_time = kNeverReturned;
      if (Uniform(rng, 0, 1) == 0) Execute(db, in);  // took effect; else never happened
    } else {
      op.output = Execute(db, in);
    }
    ops.push_back(std::move(op));
  }
  std::shuffle(ops.begin(), ops.end(), rng);  // the checker must not rely on input order
  return ops;
}

// Changes one returned operation's output (or timing) in a way that is often, not always, wrong.
void Corrupt(Rng& rng, std::vector<Op>& ops) {
  std::vector<std::size_t> returned;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].return_time != kNeverReturned) returned.push_back(i);
  }
  if (returned.empty()) return;
  Op& op = ops[returned[Uniform(rng, 0, returned.size() - 1)]];
  switch (op.input.kind) {
    case KvOpKind::kGet:
      if (Uniform(rng, 0, 2) == 0 && op.output.found) {
        op.output.version += Uniform(rng, 0, 1) == 0 ? 1 : -1;
      } else if (op.output.found && Uniform(rng, 0, 1) == 0) {
        op.output = KvOutput::Absent();
      } else {
        op.output = KvOutput::Value("v" + std::to_string(Uniform(rng, 0, ops.size())));
      }
      break;
    case KvOpKind::kCas:
    case KvOpKind::kDelete: op.output.ok = !op.output.ok.value_or(false); break;
    case KvOpKind::kPut: {  // move the write wholly after its successor's window
      std::int64_t shift = Uniform(rng, 20, 80);
      op.call_time += shift;
      op.return_time += shift;
      break;
    }
  }
}

// Independent brute force: try every order that respects real time (p must precede o when p
// returned strictly before o was called) and step the model along it.
bool BruteForce(const std::vector<Op>& ops, std::vector<bool>& placed,
                std::map<std::string, KvState>& states, std::size_t count) {
  if (count == ops.size()) return true;
  KvModel model;
  for (std::size_t o = 0; o < ops.size(); ++o) {
    if (placed[o]) continue;
    bool blocked = false;
    for (std::size_t q = 0; q < ops.size() && !blocked; ++q) {
      blocked = !placed[q] && q != o && ops[q].return_time < ops[o].call_time;
    }
    if (blocked) continue;
    KvState before = states[ops[o].input.key];
    auto next =
        model.Step(before, ops[o].input, ops[o].output, ops[o].return_time == kNeverReturned);
    if (!next) continue;
    placed[o] = true;
    states[ops[o].input.key] = *next;
    if (BruteForce(ops, placed, states, count + 1)) return true;
    states[ops[o].input.key] = before;
    placed[o] = false;
  }
  return false;
}

bool BruteForceLinearizable(const std::vector<Op>& ops) {
  std::vector<bool> placed(ops.size(), false);
  std::map<std::string, KvState> states;
  return BruteForce(ops, placed, states, 0);
}

TEST_CASE("histories from a sequential execution are always accepted", "[lincheck][property]") {
  Rng rng(20240601);
  for (int round = 0; round < 400; ++round) {
    GenParams p;
    p.ops = static_cast<int>(Uniform(rng, 1, 120));
    p.keys = static_cast<int>(Uniform(rng, 1, 4));
    p.max_half_width = Uniform(rng, 0, 60);
    p.unknown_percent = static_cast<int>(Uniform(rng, 0, 20));
    std::vector<Op> ops = GenerateLinearizable(rng, p);
    CheckResult r = Check(KvModel{}, ops, Budget{{}, 50'000'000});
    INFO("round " << round << ": " << r.description);
    REQUIRE(r.verdict == Verdict::kOk);
  }
}

TEST_CASE("on tiny histories the checker agrees with brute force", "[lincheck][property]") {
  Rng rng(77);
  int illegal = 0;
  int legal = 0;
  for (int round = 0; round < 3000; ++round) {
    GenParams p;
    p.ops = static_cast<int>(Uniform(rng, 1, 7));
    p.keys = static_cast<int>(Uniform(rng, 1, 2));
    p.max_half_width = Uniform(rng, 0, 25);
    p.unknown_percent = 20;
    std::vector<Op> ops = GenerateLinearizable(rng, p);
    if (round % 2 == 1) Corrupt(rng, ops);
    bool expected = BruteForceLinearizable(ops);
    CheckResult r = Check(KvModel{}, ops);
    INFO("round " << round << ", brute force says " << expected << "\n" << r.description);
    REQUIRE(r.verdict != Verdict::kUnknown);
    REQUIRE((r.verdict == Verdict::kOk) == expected);
    (expected ? legal : illegal) += 1;
  }
  // Both outcomes must be well represented, or the comparison proves little.
  CHECK(illegal > 600);
  CHECK(legal > 1500);
}

TEST_CASE("corrupted histories are mostly rejected", "[lincheck][property]") {
  Rng rng(4242);
  int rejected = 0;
  constexpr int kRounds = 300;
  for (int round = 0; round < kRounds; ++round) {
    GenParams p;
    p.ops = static_cast<int>(Uniform(rng, 20, 80));
    p.keys = static_cast<int>(Uniform(rng, 1, 3));
    p.max_half_width = Uniform(rng, 0, 15);
    p.unknown_percent = 5;
    std::vector<Op> ops = GenerateLinearizable(rng, p);
    REQUIRE(Check(KvModel{}, ops).verdict == Verdict::kOk);
    Corrupt(rng, ops);
    CheckResult r = Check(KvModel{}, ops, Budget{{}, 50'000'000});
    REQUIRE(r.verdict != Verdict::kUnknown);
    if (r.verdict == Verdict::kIllegal) ++rejected;
  }
  INFO("rejected " << rejected << " of " << kRounds);
  CHECK(rejected * 2 > kRounds);
}

}  // namespace
}  // namespace epoch::lincheck
