// Internal to the revision checker (revision_checker.cc, revision_replay.cc): what each operation
// is to the checker, and the state the passes share.
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/lincheck/revision_checker.h"

namespace epoch::lincheck::revcheck {

inline constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

enum class Role : std::uint8_t {
  kIgnored,  // a read that never returned, or a malformed operation
  kWrite,    // took a revision: acknowledged and wrote, or unknown outcome but observed
  kObserve,  // acknowledged without writing (a Range, a failed CAS, a delete of nothing)
  kUnknown,  // unknown outcome, not observed by any read
};

struct OpInfo {
  Role role = Role::kIgnored;
  // kWrite: its revision; kObserve: the header revision it was answered at.
  std::int64_t revision = 0;
  // kWrite: the branch that ran (a Put's or DeleteRange's one mutation, a Txn's branch).
  const std::vector<RevMutation>* writes = nullptr;
  bool succeeded = true;  // a Txn's branch
  bool unknown_outcome = false;
  std::size_t observed_by = kNone;  // an unknown-outcome write: the read that observed it
  // The highest revision of an operation (not serializable) that returned before this one's call.
  std::int64_t lower_bound = 0;
};

struct Context {
  Context(std::span<const RevOp> h, const RevisionCheckOptions& o) : history(h), options(o) {
    info.resize(h.size());
    result.operations = h.size();
  }
  void Violate(std::string_view rule, std::string description);
  [[nodiscard]] std::string Op(std::size_t i) const { return DescribeRevOp(history[i]); }
  [[nodiscard]] bool Serializable(std::size_t i) const {
    return history[i].input.kind == RevOpKind::kRange && history[i].input.serializable;
  }

  std::span<const RevOp> history;
  RevisionCheckOptions options;
  std::vector<OpInfo> info;
  RevisionCheckResult result;
};

// Replays the writes in revision order and checks every read, delete and compare against the
// state (range-state, delete-count, txn-compare). Needs info[] classified and lower bounds set.
void Replay(Context& ctx);

}  // namespace epoch::lincheck::revcheck
