#include "progress.h"

#include <algorithm>

namespace epoch::raft {

void Inflights::Add(LogIndex last, std::uint64_t bytes) {
  window_.push_back(Inflight{last, bytes});
  bytes_ += bytes;
}

void Inflights::FreeLE(LogIndex index) {
  while (!window_.empty() && window_.front().last <= index) {
    bytes_ -= window_.front().bytes;
    window_.pop_front();
  }
}

void Inflights::FreeFirst() {
  if (window_.empty()) return;
  bytes_ -= window_.front().bytes;
  window_.pop_front();
}

void Inflights::Reset() {
  window_.clear();
  bytes_ = 0;
}

void Progress::BecomeProbe() {
  if (state == ProgressState::kSnapshot) {
    // After a snapshot the follower has at least pending_snapshot (if it succeeded).
    next = std::max(match.Next(), pending_snapshot.Next());
  } else {
    next = match.Next();
  }
  state = ProgressState::kProbe;
  probe_sent = false;
  pending_snapshot = LogIndex(0);
  inflights.Reset();
}

void Progress::BecomeReplicate() {
  state = ProgressState::kReplicate;
  next = match.Next();
  probe_sent = false;
  pending_snapshot = LogIndex(0);
  inflights.Reset();
}

void Progress::BecomeSnapshot(LogIndex snapshot_index) {
  state = ProgressState::kSnapshot;
  pending_snapshot = snapshot_index;
  probe_sent = false;
  inflights.Reset();
}

bool Progress::MaybeUpdate(LogIndex index) {
  bool updated = false;
  if (match < index) {
    match = index;
    updated = true;
    probe_sent = false;
  }
  next = std::max(next, index.Next());
  return updated;
}

bool Progress::MaybeDecrTo(LogIndex rejected, LogIndex hint) {
  if (state == ProgressState::kReplicate) {
    // Stale if the rejected append was already matched; otherwise restart from match + 1.
    if (rejected <= match) return false;
    next = match.Next();
    return true;
  }
  // Probe (or snapshot): only the answer to the message in flight counts.
  if (next - 1 != rejected) return false;
  next = std::max(std::min(rejected, hint.Next()), match.Next());
  probe_sent = false;
  return true;
}

void Progress::SentEntries(LogIndex last, std::uint64_t bytes, bool had_entries) {
  switch (state) {
    case ProgressState::kReplicate:
      if (had_entries) {
        next = last.Next();
        inflights.Add(last, bytes);
      }
      break;
    case ProgressState::kProbe: probe_sent = true; break;
    case ProgressState::kSnapshot: break;
  }
}

bool Progress::IsPaused() const {
  switch (state) {
    case ProgressState::kProbe: return probe_sent;
    case ProgressState::kReplicate: return inflights.Full();
    case ProgressState::kSnapshot: return true;
  }
  return true;
}

}  // namespace epoch::raft
