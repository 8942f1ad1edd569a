// RaftLog: the core's view of its log — the persisted part read through LogReader ("stable") plus
// the entries and snapshot that exist only in memory until the driver persists them ("unstable"),
// in the style of etcd raft's raftLog + unstable. Also holds commit_index (Raft Fig. 2).
//
// Unstable bookkeeping, for asynchronous persistence:
//   - unstable entries are entries_[k] with index offset_ + k; everything below offset_ (and not
//     covered by an unstable snapshot) is read from the LogReader;
//   - entries below offset_in_progress_ have been handed to the driver in a Ready but are not yet
//     acknowledged by Advance; StableTo() drops them once they are.
//   Invariant: offset_ <= offset_in_progress_ <= offset_ + entries_.size().
//   Invariant: with an unstable snapshot, offset_ == snapshot_->index + 1.
// Reads prefer the unstable part: the LogReader may hold stale entries at indexes >= offset_ (a
// truncation the driver has not persisted yet), and they are never read.
//
// Threading: owned by one Raft instance.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "assert.h"
#include "epoch/raft/log_reader.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

class RaftLog {
 public:
  RaftLog(const LogReader& stable, const NodeId& id, const Term& term);

  [[nodiscard]] LogIndex FirstIndex() const;
  [[nodiscard]] LogIndex LastIndex() const;
  [[nodiscard]] Term LastTerm() const;
  // Defined for [FirstIndex() - 1, LastIndex()]; nullopt outside (compacted or not there).
  [[nodiscard]] std::optional<Term> TermAt(LogIndex index) const;
  [[nodiscard]] bool MatchTerm(LogIndex index, Term term) const;
  // Raft §5.4.1: is a log ending at (last_index, last_term) at least as up-to-date as ours?
  [[nodiscard]] bool IsUpToDate(LogIndex last_index, Term last_term) const;
  // Entries [lo, hi), lo >= FirstIndex(), hi <= LastIndex() + 1, at most max_bytes of data but at
  // least one entry when lo < hi.
  [[nodiscard]] std::vector<Entry> Slice(LogIndex lo, LogIndex hi, std::uint64_t max_bytes) const;
  // The largest index i <= index whose term is <= term, with its term (fast backtracking hint).
  // Stops at the first compacted index (returned with its term unknown: Term(0)).
  [[nodiscard]] std::pair<LogIndex, Term> FindConflictByTerm(LogIndex index, Term term) const;
  // The snapshot a leader sends to a follower that needs compacted entries.
  [[nodiscard]] SnapshotMeta Snapshot() const;

  [[nodiscard]] LogIndex committed() const { return committed_; }
  // Raises commit_index (never lowers it). Asserts index <= LastIndex().
  void CommitTo(LogIndex index);

  // Leader append of new entries (indexes already assigned, contiguous after LastIndex()).
  void Append(std::vector<Entry> entries);
  // Follower append (Raft §5.3, AppendEntries receiver steps 2–5): if our log has (prev_index,
  // prev_term), discard the conflicting suffix, append what is new, commit up to
  // min(leader_commit, last new index) and return the last new index; nullopt on a mismatch.
  std::optional<LogIndex> MaybeAppend(LogIndex prev_index, Term prev_term, LogIndex leader_commit,
                                      const std::vector<Entry>& entries);
  // Replace the log with a snapshot (InstallSnapshot accepted): commit_index = snapshot index.
  void Restore(const SnapshotMeta& snapshot);

  // --- Persistence bookkeeping (RawNode: GetReady / Advance). ---
  [[nodiscard]] bool HasEntriesToPersist() const;
  [[nodiscard]] std::vector<Entry> EntriesToPersist() const;
  [[nodiscard]] std::optional<SnapshotMeta> SnapshotToPersist() const;
  [[nodiscard]] bool HasPendingSnapshot() const { return snapshot_.has_value(); }
  // Everything returned by *ToPersist() is now handed out.
  void MarkInProgress();
  // The driver persisted entries up to (index, term): they leave the unstable part unless a
  // truncation replaced them meanwhile.
  void StableTo(LogIndex index, Term term);
  void StableSnapshotTo(LogIndex index);
  // Highest index known durable (everything below the unstable part).
  [[nodiscard]] LogIndex DurableIndex() const;

  [[nodiscard]] AssertContext AssertCtx() const { return {id_, term_}; }

 private:
  void TruncateAndAppend(std::vector<Entry> entries);
  [[nodiscard]] std::optional<Term> UnstableTermAt(LogIndex index) const;

  const LogReader& stable_;
  const NodeId& id_;
  const Term& term_;

  // commit_index: highest index known committed. Invariant: committed_ <= LastIndex(), never
  // decreases (Raft Fig. 2; a restart restores it from the hard state, clamped to the log).
  LogIndex committed_;

  std::optional<SnapshotMeta> snapshot_;  // received, not yet persisted
  bool snapshot_in_progress_ = false;
  std::vector<Entry> entries_;
  LogIndex offset_;
  LogIndex offset_in_progress_;
};

}  // namespace epoch::raft
