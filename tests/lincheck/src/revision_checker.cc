// The revision checker's passes, in order: classify each operation, resolve unknown-outcome writes
// from the values reads returned, then the order rules (unique-revision, real time, gap-free),
// then the replay (revision_replay.cc).
#include "epoch/lincheck/revision_checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "revision_context.h"

namespace epoch::lincheck {
namespace revcheck {

void Context::Violate(std::string_view rule, std::string description) {
  ++result.violations_total;
  if (result.violations.size() < options.max_violations) {
    result.violations.push_back({std::string(rule), std::move(description)});
  }
}

namespace {

bool Writes(const std::vector<RevMutation>& branch, std::int64_t deleted) {
  return deleted > 0 || std::any_of(branch.begin(), branch.end(),
                                    [](const RevMutation& m) { return !m.is_delete; });
}

void Classify(Context& ctx) {
  for (std::size_t i = 0; i < ctx.history.size(); ++i) {
    const RevOp& op = ctx.history[i];
    OpInfo& info = ctx.info[i];
    bool is_range = op.input.kind == RevOpKind::kRange;
    if (op.return_time == kNeverReturned) {
      if (is_range) continue;  // a failed read had no effect
      info.role = Role::kUnknown;
      info.unknown_outcome = true;
      ++ctx.result.unknown;
      continue;
    }
    if (op.output.header_revision <= 0) {
      ctx.Violate(kRuleMalformed, "acknowledged without a header revision: " + ctx.Op(i));
      continue;
    }
    info.revision = op.output.header_revision;
    if (is_range) {
      info.role = Role::kObserve;
      continue;
    }
    info.succeeded = op.input.kind != RevOpKind::kTxn || op.output.succeeded;
    info.writes = info.succeeded ? &op.input.success : &op.input.failure;
    info.role = Writes(*info.writes, op.output.deleted) ? Role::kWrite : Role::kObserve;
  }
}

// Who wrote each value: (op, branch), or kNone for a value written more than once.
using Writers = std::unordered_map<std::string, std::pair<std::size_t, bool>>;

Writers CollectWriters(const Context& ctx) {
  Writers writers;
  for (std::size_t i = 0; i < ctx.history.size(); ++i) {
    for (bool branch : {true, false}) {
      const RevInput& in = ctx.history[i].input;
      for (const RevMutation& m : branch ? in.success : in.failure) {
        if (m.is_delete) continue;
        auto [it, fresh] = writers.emplace(m.value, std::pair{i, branch});
        if (!fresh && it->second.first != i) it->second.first = kNone;
      }
    }
  }
  return writers;
}

// An unknown-outcome write whose value a read returned took effect at that kv's mod_revision.
void ResolveUnknown(Context& ctx) {
  Writers writers = CollectWriters(ctx);
  for (std::size_t r = 0; r < ctx.history.size(); ++r) {
    if (ctx.history[r].input.kind != RevOpKind::kRange || ctx.info[r].role != Role::kObserve) {
      continue;
    }
    for (const RevKeyValue& kv : ctx.history[r].output.kvs) {
      auto it = writers.find(kv.value);
      if (it == writers.end() || it->second.first == kNone) continue;
      auto [u, branch] = it->second;
      OpInfo& info = ctx.info[u];
      if (!info.unknown_outcome) continue;
      if (info.observed_by == kNone) {
        info.observed_by = r;
        info.revision = kv.mod_revision;
        info.succeeded = branch;
        const RevInput& in = ctx.history[u].input;
        info.writes = branch ? &in.success : &in.failure;
        info.role = Role::kWrite;
        ++ctx.result.observed;
      } else if (info.revision != kv.mod_revision || info.succeeded != branch) {
        ctx.Violate(kRuleUniqueRevision,
                    fmt::format("one write observed at revision {} by\n  {}\nand at revision {} "
                                "(or from its other branch) by\n  {}\nthe write:\n  {}",
                                info.revision, ctx.Op(info.observed_by), kv.mod_revision, ctx.Op(r),
                                ctx.Op(u)));
      }
    }
  }
}

void CheckUnique(Context& ctx) {
  std::map<std::int64_t, std::size_t> owner;
  for (std::size_t i = 0; i < ctx.history.size(); ++i) {
    const OpInfo& info = ctx.info[i];
    if (info.role != Role::kWrite) continue;
    ++ctx.result.writes;
    std::int64_t rev = info.revision;
    if (ctx.options.start_revision > 0 && rev <= ctx.options.start_revision) {
      ctx.Violate(kRuleUniqueRevision,
                  fmt::format("revision {} is at or below the start revision {}:\n  {}", rev,
                              ctx.options.start_revision, ctx.Op(i)));
      continue;
    }
    auto [it, fresh] = owner.emplace(rev, i);
    if (!fresh) {
      ctx.Violate(kRuleUniqueRevision, fmt::format("two writes took revision {}:\n  {}\n  {}", rev,
                                                   ctx.Op(it->second), ctx.Op(i)));
    }
  }
}

// The operations that returned, by return time, with the highest revision among them so far.
class Completed {
 public:
  explicit Completed(const Context& ctx) {
    for (std::size_t i = 0; i < ctx.history.size(); ++i) {
      Role role = ctx.info[i].role;
      if ((role != Role::kWrite && role != Role::kObserve) || ctx.Serializable(i)) continue;
      if (ctx.history[i].return_time == kNeverReturned) continue;
      done_.push_back({ctx.history[i].return_time, ctx.info[i].revision, i});
    }
    std::sort(done_.begin(), done_.end(),
              [](const Done& a, const Done& b) { return a.return_time < b.return_time; });
    for (std::size_t k = 1; k < done_.size(); ++k) {
      if (done_[k - 1].revision > done_[k].revision) {
        done_[k].revision = done_[k - 1].revision;
        done_[k].op = done_[k - 1].op;
      }
    }
  }
  // The operation with the highest revision among those that returned strictly before `t`
  // (intervals are closed), or kNone.
  [[nodiscard]] std::size_t HighestBefore(std::int64_t t) const {
    auto it = std::lower_bound(done_.begin(), done_.end(), t,
                               [](const Done& d, std::int64_t v) { return d.return_time < v; });
    return it == done_.begin() ? kNone : std::prev(it)->op;
  }

 private:
  struct Done {
    std::int64_t return_time;
    std::int64_t revision;  // after the prefix pass: the highest up to here ...
    std::size_t op;         // ... and whose it is
  };
  std::vector<Done> done_;
};

void CheckRealTimeOf(Context& ctx, std::size_t i, std::size_t before) {
  const OpInfo& info = ctx.info[i];
  const OpInfo& prior = ctx.info[before];
  bool prior_wrote = prior.role == Role::kWrite;
  if (info.role == Role::kWrite && info.revision <= prior.revision) {
    ctx.Violate(prior_wrote ? kRuleWriteOrder : kRuleWriteAfterRead,
                fmt::format("a write invoked after this {} returned at revision {}:\n  {}\n"
                            "took revision {}, not above it:\n  {}",
                            prior_wrote ? "write" : "read", prior.revision, ctx.Op(before),
                            info.revision, ctx.Op(i)));
  } else if (info.role == Role::kObserve && info.revision < prior.revision) {
    ctx.Violate(prior_wrote ? kRuleReadAfterWrite : kRuleReadAfterRead,
                fmt::format("a read invoked after this {} returned at revision {}:\n  {}\n"
                            "was answered at the older revision {}:\n  {}",
                            prior_wrote ? "write" : "read", prior.revision, ctx.Op(before),
                            info.revision, ctx.Op(i)));
  }
}

void CheckRealTime(Context& ctx) {
  Completed completed(ctx);
  for (std::size_t i = 0; i < ctx.history.size(); ++i) {
    OpInfo& info = ctx.info[i];
    if (info.role == Role::kIgnored || ctx.Serializable(i)) continue;
    std::size_t before = completed.HighestBefore(ctx.history[i].call_time);
    if (before == kNone) continue;
    info.lower_bound = ctx.info[before].revision;
    if (info.role != Role::kUnknown) CheckRealTimeOf(ctx, i, before);
  }
}

// Hall's condition: the k-th missing revision r (in increasing order) needs k unobserved
// unknown-outcome writes that could take a revision as high as r (lower bound below r).
void CheckGaps(Context& ctx) {
  std::set<std::int64_t> taken;
  std::int64_t highest = 0;
  std::vector<std::int64_t> bounds;  // lower bounds of the unobserved unknown-outcome writes
  for (const OpInfo& info : ctx.info) {
    if (info.role == Role::kWrite) taken.insert(info.revision);
    if (info.role == Role::kWrite || info.role == Role::kObserve) {
      highest = std::max(highest, info.revision);
    }
    if (info.role == Role::kUnknown) bounds.push_back(info.lower_bound);
  }
  if (taken.empty() && ctx.options.start_revision == 0) return;
  std::sort(bounds.begin(), bounds.end());
  std::int64_t low =
      ctx.options.start_revision > 0 ? ctx.options.start_revision + 1 : *taken.begin();
  std::size_t missing = 0;
  for (std::int64_t r = low; r <= highest; ++r) {
    if (taken.count(r) != 0) continue;
    ++missing;
    auto fillers = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), r) -
                                            bounds.begin());
    if (fillers >= missing) continue;
    ctx.Violate(kRuleGapFree,
                fmt::format("revision {} (in {}..{}) was taken by no write seen; it is missing "
                            "revision number {} in that span, and only {} unobserved "
                            "unknown-outcome write(s) invoked below it could have taken it",
                            r, low, highest, missing, fillers));
    return;
  }
}

}  // namespace
}  // namespace revcheck

std::string RevisionCheckResult::Describe() const {
  std::string out;
  for (const RevisionViolation& v : violations) {
    out += fmt::format("[{}] {}\n", v.rule, v.description);
  }
  if (violations_total > violations.size()) {
    out += fmt::format("... and {} more violation(s)\n", violations_total - violations.size());
  }
  return out;
}

RevisionCheckResult CheckRevisions(std::span<const RevOp> history,
                                   const RevisionCheckOptions& options) {
  revcheck::Context ctx(history, options);
  revcheck::Classify(ctx);
  revcheck::ResolveUnknown(ctx);
  revcheck::CheckUnique(ctx);
  revcheck::CheckRealTime(ctx);
  if (!options.other_writers) revcheck::CheckGaps(ctx);
  revcheck::Replay(ctx);
  return std::move(ctx.result);
}

}  // namespace epoch::lincheck
