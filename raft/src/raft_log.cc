#include "raft_log.h"

#include <algorithm>

namespace epoch::raft {

RaftLog::RaftLog(const LogReader& stable, const NodeId& id, const Term& term)
    : stable_(stable), id_(id), term_(term) {
  offset_ = stable_.LastIndex().Next();
  offset_in_progress_ = offset_;
  // The persisted commit is a hint: it can be behind (safe) or, if the driver wrote the hard state
  // without the entries, ahead of the log (clamped: lowering a local commit index is always safe).
  const LogIndex snapshot_index = stable_.LastSnapshot().index;
  committed_ = std::max(snapshot_index, std::min(stable_.InitialHardState().commit, LastIndex()));
}

LogIndex RaftLog::FirstIndex() const {
  if (snapshot_) return snapshot_->index.Next();
  return stable_.FirstIndex();
}

LogIndex RaftLog::LastIndex() const {
  if (!entries_.empty()) return entries_.back().index;
  if (snapshot_) return snapshot_->index;
  return offset_ - 1;
}

Term RaftLog::LastTerm() const {
  std::optional<Term> term = TermAt(LastIndex());
  RAFT_ASSERT(term.has_value(), "no term for last index {}", LastIndex());
  return *term;
}

std::optional<Term> RaftLog::UnstableTermAt(LogIndex index) const {
  if (index >= offset_) {
    if (index > LastIndex()) return std::nullopt;
    return entries_[index - offset_].term;
  }
  if (snapshot_ && index == snapshot_->index) return snapshot_->term;
  return std::nullopt;
}

std::optional<Term> RaftLog::TermAt(LogIndex index) const {
  if (snapshot_) {
    if (index < snapshot_->index) return std::nullopt;  // compacted by the snapshot
    return UnstableTermAt(index);
  }
  if (index >= offset_) return UnstableTermAt(index);
  return stable_.TermAt(index);
}

bool RaftLog::MatchTerm(LogIndex index, Term term) const {
  std::optional<Term> t = TermAt(index);
  return t.has_value() && *t == term;
}

bool RaftLog::IsUpToDate(LogIndex last_index, Term last_term) const {
  const Term our_term = LastTerm();
  return last_term > our_term || (last_term == our_term && last_index >= LastIndex());
}

std::vector<Entry> RaftLog::Slice(LogIndex lo, LogIndex hi, std::uint64_t max_bytes) const {
  RAFT_ASSERT(lo >= FirstIndex() && lo <= hi && hi <= LastIndex().Next(),
              "Slice({}, {}) outside [{}, {}]", lo, hi, FirstIndex(), LastIndex().Next());
  std::vector<Entry> out;
  if (lo == hi) return out;
  std::uint64_t bytes = 0;
  if (lo < offset_) {
    out = stable_.Entries(lo, std::min(hi, offset_), max_bytes);
    RAFT_ASSERT(!out.empty() && out.front().index == lo, "LogReader::Entries({}) returned {}", lo,
                out.empty() ? LogIndex(0) : out.front().index);
    for (const Entry& e : out) bytes += e.data.size();
    if (out.back().index.Next() < std::min(hi, offset_)) return out;  // byte limit reached
  }
  for (LogIndex i = std::max(lo, offset_); i < hi; ++i) {
    const Entry& e = entries_[i - offset_];
    bytes += e.data.size();
    if (!out.empty() && bytes > max_bytes) break;
    out.push_back(e);
  }
  return out;
}

std::pair<LogIndex, Term> RaftLog::FindConflictByTerm(LogIndex index, Term term) const {
  for (LogIndex i = index;; --i) {
    std::optional<Term> t = TermAt(i);
    if (!t) return {i, Term(0)};
    if (*t <= term || i.IsZero()) return {i, *t};
  }
}

SnapshotMeta RaftLog::Snapshot() const {
  if (snapshot_) return *snapshot_;
  return stable_.LastSnapshot();
}

void RaftLog::CommitTo(LogIndex index) {
  if (index <= committed_) return;
  RAFT_ASSERT(index <= LastIndex(), "commit {} beyond last index {}", index, LastIndex());
  committed_ = index;
}

void RaftLog::Append(std::vector<Entry> entries) {
  if (entries.empty()) return;
  RAFT_ASSERT(entries.front().index == LastIndex().Next(), "append at {} after last {}",
              entries.front().index, LastIndex());
  TruncateAndAppend(std::move(entries));
}

std::optional<LogIndex> RaftLog::MaybeAppend(LogIndex prev_index, Term prev_term,
                                             LogIndex leader_commit,
                                             const std::vector<Entry>& entries) {
  if (!MatchTerm(prev_index, prev_term)) return std::nullopt;
  const LogIndex last_new = prev_index + entries.size();
  // Skip the entries we already have (same index and term: Log Matching, Raft §5.3).
  std::size_t k = 0;
  while (k < entries.size()) {
    const Entry& e = entries[k];
    RAFT_ASSERT(e.index == prev_index + (k + 1), "non-contiguous AppendEntries at {}", e.index);
    if (!MatchTerm(e.index, e.term)) break;
    ++k;
  }
  if (k < entries.size()) {
    RAFT_ASSERT(entries[k].index > committed_,
                "AppendEntries conflicts with committed entry {} (commit {})", entries[k].index,
                committed_);
    TruncateAndAppend(
        std::vector<Entry>(entries.begin() + static_cast<std::ptrdiff_t>(k), entries.end()));
  }
  CommitTo(std::min(leader_commit, last_new));
  return last_new;
}

void RaftLog::TruncateAndAppend(std::vector<Entry> entries) {
  const LogIndex first = entries.front().index;
  if (first == offset_ + entries_.size()) {
    // Plain append.
  } else if (first <= offset_) {
    // Replaces the whole unstable part (and shadows stable entries >= first).
    RAFT_ASSERT(!snapshot_ || first > snapshot_->index, "truncation below pending snapshot");
    entries_.clear();
    offset_ = first;
    offset_in_progress_ = first;
  } else {
    entries_.resize(first - offset_);
    offset_in_progress_ = std::min(offset_in_progress_, first);
  }
  for (Entry& e : entries) entries_.push_back(std::move(e));
}

void RaftLog::Restore(const SnapshotMeta& snapshot) {
  RAFT_ASSERT(snapshot.index > committed_, "restoring snapshot {} at or below commit {}",
              snapshot.index, committed_);
  snapshot_ = snapshot;
  snapshot_in_progress_ = false;
  entries_.clear();
  offset_ = snapshot.index.Next();
  offset_in_progress_ = offset_;
  committed_ = snapshot.index;
}

bool RaftLog::HasEntriesToPersist() const {
  return offset_in_progress_ < offset_ + entries_.size();
}

std::vector<Entry> RaftLog::EntriesToPersist() const {
  return std::vector<Entry>(
      entries_.begin() + static_cast<std::ptrdiff_t>(offset_in_progress_ - offset_),
      entries_.end());
}

std::optional<SnapshotMeta> RaftLog::SnapshotToPersist() const {
  if (snapshot_ && !snapshot_in_progress_) return snapshot_;
  return std::nullopt;
}

void RaftLog::MarkInProgress() {
  offset_in_progress_ = offset_ + entries_.size();
  if (snapshot_) snapshot_in_progress_ = true;
}

void RaftLog::StableTo(LogIndex index, Term term) {
  if (index < offset_ || snapshot_) return;  // already stable, or a snapshot must land first
  std::optional<Term> t = UnstableTermAt(index);
  if (!t || *t != term) return;  // replaced by a truncation since it was handed out
  entries_.erase(entries_.begin(),
                 entries_.begin() + static_cast<std::ptrdiff_t>(index - offset_ + 1));
  offset_ = index.Next();
  offset_in_progress_ = std::max(offset_in_progress_, offset_);
}

void RaftLog::StableSnapshotTo(LogIndex index) {
  if (snapshot_ && snapshot_->index == index) {
    snapshot_.reset();
    snapshot_in_progress_ = false;
  }
}

LogIndex RaftLog::DurableIndex() const {
  if (snapshot_) return LogIndex(0);
  return offset_ - 1;
}

}  // namespace epoch::raft
