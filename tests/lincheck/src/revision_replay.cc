// The replay of the revision checker: writes applied in revision order to a key -> (value,
// create_revision, mod_revision, version) map, every operation that returned a header revision
// checked against the state at that revision (range-state, delete-count, txn-compare).
//
// Doubt: an unknown-outcome write no read observed may have taken any free revision above its
// lower bound. Each time the replay passes free revisions (a gap between the writes it knows), the
// unobserved writes that could have taken one make the keys they touch doubtful: `may_put` (a put
// the replay does not have: create_revision may be lower, version higher, compares unknown) or
// `may_delete` (a delete it does not have: the key may be gone, create_revision higher, version
// lower). A known delete of a key ends its doubt until the next gap.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "revision_context.h"

namespace epoch::lincheck::revcheck {
namespace {

struct KeyState {
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::size_t writer = kNone;
};

struct Doubt {
  bool may_put = false;
  bool may_delete = false;
  [[nodiscard]] bool Any() const { return may_put || may_delete; }
};

// got == want, or off in a direction a write the replay does not have could move it.
bool Fits(std::int64_t got, std::int64_t want, bool may_be_lower, bool may_be_higher) {
  return got == want || (got < want && may_be_lower) || (got > want && may_be_higher);
}

std::string Show(const std::string& key, const KeyState& s) {
  return fmt::format("{}=\"{}\" (create {}, mod {}, version {})", key, s.value, s.create_revision,
                     s.mod_revision, s.version);
}

std::string Show(const RevKeyValue& kv) {
  return fmt::format("{}=\"{}\" (create {}, mod {}, version {})", kv.key, kv.value,
                     kv.create_revision, kv.mod_revision, kv.version);
}

class Replayer {
 public:
  explicit Replayer(Context& ctx) : ctx_(ctx), cursor_(ctx.options.start_revision) {}
  void Run();

 private:
  void MarkGapsUpTo(std::int64_t rev);
  void Apply(std::size_t op);
  void Observe(std::size_t op);
  void CheckRange(std::size_t op);
  void CheckCompares(std::size_t op, std::int64_t at);
  void CheckNothingToDelete(std::size_t op);
  [[nodiscard]] std::string CompareKey(const std::string& key, const KeyState* want,
                                       const RevKeyValue* got) const;
  [[nodiscard]] std::string ShowWriter(const KeyState& s) const;
  [[nodiscard]] Doubt DoubtOf(const std::string& key) const;
  [[nodiscard]] bool RangeDoubtful(const std::string& begin, const std::string& end) const;
  [[nodiscard]] std::optional<bool> Evaluate(const std::vector<RevCompare>& compares) const;
  // The keys of the state in [begin, end) (just `begin` if end is empty).
  [[nodiscard]] std::vector<std::map<std::string, KeyState>::const_iterator> InState(
      const std::string& begin, const std::string& end) const;

  Context& ctx_;
  std::map<std::string, KeyState> state_;
  std::map<std::string, Doubt> doubt_;
  std::vector<std::pair<std::string, std::string>> doubtful_ranges_;  // never cleared
  std::vector<std::size_t> pending_;  // unobserved unknown-outcome writes by lower bound
  std::size_t activated_ = 0;         // pending_[0, activated_) may have taken a free revision
  std::int64_t cursor_;               // revisions up to here are replayed
};

void Replayer::Run() {
  std::vector<std::size_t> writes, observes;
  for (std::size_t i = 0; i < ctx_.info.size(); ++i) {
    switch (ctx_.info[i].role) {
      case Role::kWrite: writes.push_back(i); break;
      case Role::kObserve: observes.push_back(i); break;
      case Role::kUnknown: pending_.push_back(i); break;
      case Role::kIgnored: break;
    }
  }
  auto by_revision = [this](std::size_t a, std::size_t b) {
    return ctx_.info[a].revision < ctx_.info[b].revision;
  };
  std::stable_sort(writes.begin(), writes.end(), by_revision);
  std::stable_sort(observes.begin(), observes.end(), by_revision);
  std::stable_sort(pending_.begin(), pending_.end(), [this](std::size_t a, std::size_t b) {
    return ctx_.info[a].lower_bound < ctx_.info[b].lower_bound;
  });
  std::size_t w = 0, o = 0;
  while (w < writes.size() || o < observes.size()) {
    // An operation answered at revision R sees the write that took R.
    bool write_next =
        w < writes.size() &&
        (o == observes.size() || ctx_.info[writes[w]].revision <= ctx_.info[observes[o]].revision);
    if (write_next) {
      Apply(writes[w++]);
    } else {
      Observe(observes[o++]);
    }
  }
}

// Revisions (cursor_, rev] are free: an unobserved write with a lower bound below rev may have
// taken one of them.
void Replayer::MarkGapsUpTo(std::int64_t rev) {
  if (rev <= cursor_) return;
  cursor_ = rev;
  while (activated_ < pending_.size() && ctx_.info[pending_[activated_]].lower_bound < rev) {
    const RevInput& in = ctx_.history[pending_[activated_++]].input;
    for (const auto* branch : {&in.success, &in.failure}) {
      for (const RevMutation& m : *branch) {
        if (m.is_delete && !m.range_end.empty()) doubtful_ranges_.emplace_back(m.key, m.range_end);
      }
    }
  }
  for (std::size_t k = 0; k < activated_; ++k) {
    const RevInput& in = ctx_.history[pending_[k]].input;
    for (const auto* branch : {&in.success, &in.failure}) {
      for (const RevMutation& m : *branch) {
        if (!m.is_delete) doubt_[m.key].may_put = true;
        if (m.is_delete && m.range_end.empty()) doubt_[m.key].may_delete = true;
      }
    }
  }
}

void Replayer::Apply(std::size_t op) {
  const OpInfo& info = ctx_.info[op];
  std::int64_t rev = info.revision;
  MarkGapsUpTo(rev - 1);
  CheckCompares(op, rev - 1);
  std::int64_t deleted = 0;
  bool doubtful = false;
  for (const RevMutation& m : *info.writes) {
    if (!m.is_delete) {
      auto [it, created] = state_.try_emplace(m.key);
      KeyState& s = it->second;
      if (created) s.create_revision = rev;
      s = KeyState{m.value, s.create_revision, rev, created ? 1 : s.version + 1, op};
      continue;
    }
    doubtful = doubtful || RangeDoubtful(m.key, m.range_end);
    for (auto it : InState(m.key, m.range_end)) {
      doubt_.erase(it->first);
      state_.erase(it);
      ++deleted;
    }
    if (m.range_end.empty()) doubt_.erase(m.key);
  }
  if (!info.unknown_outcome && !doubtful && deleted != ctx_.history[op].output.deleted) {
    ctx_.Violate(kRuleDeleteCount,
                 fmt::format("{}\nreports {} key(s) deleted; the state before its revision {} "
                             "held {} in its range(s)",
                             ctx_.Op(op), ctx_.history[op].output.deleted, rev, deleted));
  }
  cursor_ = std::max(cursor_, rev);
}

void Replayer::Observe(std::size_t op) {
  MarkGapsUpTo(ctx_.info[op].revision);
  if (ctx_.history[op].input.kind == RevOpKind::kRange) {
    CheckRange(op);
    return;
  }
  CheckCompares(op, ctx_.info[op].revision);
  CheckNothingToDelete(op);
}

void Replayer::CheckRange(std::size_t op) {
  const RevInput& in = ctx_.history[op].input;
  std::map<std::string, const RevKeyValue*> got;
  for (const RevKeyValue& kv : ctx_.history[op].output.kvs) {
    if (!InRange(kv.key, in.key, in.range_end) || !got.emplace(kv.key, &kv).second) {
      ctx_.Violate(kRuleRangeState,
                   fmt::format("{}\nreturned {} outside its range or twice", ctx_.Op(op), kv.key));
      return;
    }
  }
  std::map<std::string, const KeyState*> want;
  for (auto it : InState(in.key, in.range_end)) want.emplace(it->first, &it->second);
  std::map<std::string, bool> keys;
  for (const auto& [k, _] : got) keys[k] = true;
  for (const auto& [k, _] : want) keys[k] = true;
  for (const auto& [k, _] : keys) {
    auto w = want.find(k);
    auto g = got.find(k);
    std::string why =
        CompareKey(k, w == want.end() ? nullptr : w->second, g == got.end() ? nullptr : g->second);
    if (why.empty()) continue;
    ctx_.Violate(kRuleRangeState, fmt::format("{}\nanswered at revision {}: {}", ctx_.Op(op),
                                              ctx_.info[op].revision, why));
    return;
  }
}

std::string Replayer::CompareKey(const std::string& key, const KeyState* want,
                                 const RevKeyValue* got) const {
  Doubt d = DoubtOf(key);
  if (want == nullptr) {
    return fmt::format("it returned {}, but replaying the writes gives no key {}", Show(*got), key);
  }
  std::string replay = fmt::format("replaying the writes gives {}, written by\n  {}",
                                   Show(key, *want), ShowWriter(*want));
  if (got == nullptr) return d.may_delete ? "" : fmt::format("{} is missing; {}", key, replay);
  bool ok = got->value == want->value && got->mod_revision == want->mod_revision &&
            Fits(got->create_revision, want->create_revision, d.may_put, d.may_delete) &&
            Fits(got->version, want->version, d.may_delete, d.may_put) &&
            got->create_revision <= got->mod_revision && got->version >= 1;
  return ok ? "" : fmt::format("it returned {}; {}", Show(*got), replay);
}

std::string Replayer::ShowWriter(const KeyState& s) const {
  return s.writer == kNone ? std::string("?") : ctx_.Op(s.writer);
}

void Replayer::CheckCompares(std::size_t op, std::int64_t at) {
  const RevInput& in = ctx_.history[op].input;
  if (in.kind != RevOpKind::kTxn) return;
  std::optional<bool> holds = Evaluate(in.compares);
  if (!holds.has_value() || *holds == ctx_.info[op].succeeded) return;
  std::string state;
  for (const RevCompare& c : in.compares) {
    auto it = state_.find(c.key);
    state +=
        it == state_.end() ? fmt::format("\n  {} absent", c.key) : "\n  " + Show(c.key, it->second);
  }
  ctx_.Violate(kRuleTxnCompare,
               fmt::format("{}\nran its {} branch, but in the state at revision {} its compares "
                           "are {}:{}",
                           ctx_.Op(op), ctx_.info[op].succeeded ? "then" : "else", at,
                           *holds ? "true" : "false", state));
}

void Replayer::CheckNothingToDelete(std::size_t op) {
  const OpInfo& info = ctx_.info[op];
  if (info.writes == nullptr) return;
  for (const RevMutation& m : *info.writes) {
    if (!m.is_delete || RangeDoubtful(m.key, m.range_end)) continue;
    auto held = InState(m.key, m.range_end);
    if (held.empty() || DoubtOf(held.front()->first).may_delete) continue;
    ctx_.Violate(
        kRuleDeleteCount,
        fmt::format("{}\ndeleted nothing, but the state at revision {} holds {}", ctx_.Op(op),
                    info.revision, Show(held.front()->first, held.front()->second)));
    return;
  }
}

Doubt Replayer::DoubtOf(const std::string& key) const {
  auto it = doubt_.find(key);
  Doubt d = it == doubt_.end() ? Doubt{} : it->second;
  for (const auto& [begin, end] : doubtful_ranges_) {
    if (InRange(key, begin, end)) d.may_delete = true;
  }
  return d;
}

bool Replayer::RangeDoubtful(const std::string& begin, const std::string& end) const {
  if (end.empty()) return DoubtOf(begin).Any();
  for (auto it = doubt_.lower_bound(begin); it != doubt_.end() && InRange(it->first, begin, end);
       ++it) {
    if (it->second.Any()) return true;
  }
  return std::any_of(doubtful_ranges_.begin(), doubtful_ranges_.end(), [&](const auto& r) {
    return r.second == kRangeToEnd || end == kRangeToEnd || (r.first < end && begin < r.second);
  });
}

std::optional<bool> Replayer::Evaluate(const std::vector<RevCompare>& compares) const {
  bool doubtful = false;
  for (const RevCompare& c : compares) {
    if (DoubtOf(c.key).Any()) {
      doubtful = true;
      continue;
    }
    auto it = state_.find(c.key);
    bool holds =
        c.value ? (it != state_.end() && it->second.value == *c.value) : it == state_.end();
    if (!holds) return false;
  }
  if (doubtful) return std::nullopt;
  return true;
}

std::vector<std::map<std::string, KeyState>::const_iterator> Replayer::InState(
    const std::string& begin, const std::string& end) const {
  std::vector<std::map<std::string, KeyState>::const_iterator> out;
  if (end.empty()) {
    if (auto it = state_.find(begin); it != state_.end()) out.push_back(it);
    return out;
  }
  for (auto it = state_.lower_bound(begin); it != state_.end() && InRange(it->first, begin, end);
       ++it) {
    out.push_back(it);
  }
  return out;
}

}  // namespace

void Replay(Context& ctx) { Replayer(ctx).Run(); }

}  // namespace epoch::lincheck::revcheck
