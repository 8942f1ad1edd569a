// The revision checker: checks a history of etcd operations (revision_history.h) against etcd's
// revision semantics, using the revisions the server returned. Where the linearizability checker
// (checker.h) searches for an order per key, this one is handed the order: the revisions.
//
// Rules (each violation names one):
//   unique-revision   every write that took effect (an acknowledged Put, a Txn whose branch wrote,
//                     a DeleteRange that deleted something, an unknown-outcome write some read
//                     observed) has its own revision; all of a Txn's writes share it, so one
//                     write observed at two revisions breaks this too.
//   gap-free          the revisions from the first to the highest one seen have no hole that the
//                     unknown-outcome writes not observed by any read cannot fill (a write can
//                     take a revision only above every revision completed before its call).
//                     Off with `other_writers`.
//   write-order       write A acknowledged before write B was invoked: rev(A) < rev(B).
//   read-after-write  write A acknowledged before a read was invoked: header revision >= rev(A).
//   write-after-read  read returned before write B was invoked: rev(B) > the read's header.
//   read-after-read   read A returned before read B was invoked: header(B) >= header(A).
//   range-state       replaying the writes in revision order, a Range answered at header R
//                     returns exactly the keys of the state at R, each with its value,
//                     create_revision, mod_revision and version (version counts puts since
//                     creation; a delete removes the key).
//   delete-count      a DeleteRange (or a Txn's deletes) reports as deleted the keys the state
//                     held in its range; one that deleted nothing found its range empty.
//   txn-compare       a Txn took the branch its compares select in the state it ran in (the
//                     state before its revision, or at its header if it wrote nothing).
//   malformed         the history itself is unusable (an acknowledged op without a revision).
//
// An unknown-outcome write (return_time == kNeverReturned) took effect iff a read returned one of
// its (unique) values; its revision is then that read's mod_revision. One that no read observed
// may have taken any revision that no observed write holds and that lies above everything
// completed before its call. Keys such a write could touch are then uncertain from that revision
// on (until a delete of the key): reads of them are checked only for what it cannot change
// (value and mod_revision; with a possible delete also presence; create_revision and version in
// the direction it could move them).
//
// Serializable reads are checked against the state at their header revision but not by the
// real-time rules (they may be stale).
//
// Who calls it: the chaos campaign on the register workload's history, and the unit tests.
//
// Cost: O(n log n) plus, per gap in the revisions, the unobserved unknown-outcome writes.
//
// Threading: CheckRevisions() is a pure function of its arguments.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/lincheck/revision_history.h"

namespace epoch::lincheck {

inline constexpr std::string_view kRuleUniqueRevision = "unique-revision";
inline constexpr std::string_view kRuleGapFree = "gap-free";
inline constexpr std::string_view kRuleWriteOrder = "write-order";
inline constexpr std::string_view kRuleReadAfterWrite = "read-after-write";
inline constexpr std::string_view kRuleWriteAfterRead = "write-after-read";
inline constexpr std::string_view kRuleReadAfterRead = "read-after-read";
inline constexpr std::string_view kRuleRangeState = "range-state";
inline constexpr std::string_view kRuleDeleteCount = "delete-count";
inline constexpr std::string_view kRuleTxnCompare = "txn-compare";
inline constexpr std::string_view kRuleMalformed = "malformed";

struct RevisionCheckOptions {
  // The store's revision before the history's first operation, if known (etcd's empty store: 1);
  // 0 = unknown. When known, the gap rule also covers the revisions above it and below the first
  // recorded one, and no write may take a revision at or below it.
  std::int64_t start_revision = 0;
  // Clients that were not recorded also wrote, to keys no recorded operation reads or writes:
  // revisions between recorded ones may be theirs, so the gap rule is off.
  bool other_writers = false;
  std::size_t max_violations = 16;  // further violations are counted, not described
};

struct RevisionViolation {
  std::string rule;  // one of the kRule* names
  std::string description;
};

struct RevisionCheckResult {
  std::vector<RevisionViolation> violations;
  std::size_t violations_total = 0;
  std::size_t operations = 0;
  std::size_t writes = 0;    // operations that took a revision
  std::size_t unknown = 0;   // writes with an unknown outcome
  std::size_t observed = 0;  // ... of which some read observed

  [[nodiscard]] bool Ok() const { return violations_total == 0; }
  // Every violation, one per paragraph, led by its rule.
  [[nodiscard]] std::string Describe() const;
};

[[nodiscard]] RevisionCheckResult CheckRevisions(std::span<const RevOp> history,
                                                 const RevisionCheckOptions& options = {});

}  // namespace epoch::lincheck
