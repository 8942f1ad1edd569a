// Ready / Advance: what the core hands its driver, and what the driver reports back
// (etcd raft's RawNode). See raft/DESIGN.md "Driving the core".
#include <algorithm>

#include "raft.h"

namespace epoch::raft {

std::vector<Entry> Raft::NextCommittedEntries() const {
  if (!HasCommittedEntriesToApply()) return {};
  return log_.Slice(applying_.Next(), log_.committed().Next(),
                    config_.max_committed_bytes_per_ready);
}

// The committed entries at or below the durable index: persisted by an Advanced Ready, and not
// replaced by anything in the unstable part (a conflicting append lowers the durable index to
// below the conflict; a pending snapshot makes it 0).
std::size_t Raft::CountDurable(const std::vector<Entry>& committed) const {
  if (config_.mutations.apply_before_durable) return committed.size();
  const LogIndex durable = log_.DurableIndex();
  return static_cast<std::size_t>(
      std::partition_point(committed.begin(), committed.end(),
                           [durable](const Entry& e) { return e.index <= durable; }) -
      committed.begin());
}

bool Raft::HasCommittedEntriesToApply() const {
  // A received snapshot is installed (and so "applied") before any entry after it.
  return !log_.HasPendingSnapshot() && log_.committed() > applying_;
}

bool Raft::HasPendingOutput() const {
  return !messages_.empty() || !messages_after_persist_.empty() || !read_states_.empty() ||
         conf_changed_ || HasReadRoundToFlush();
}

bool Raft::HasReady() const {
  if (soft_state() != prev_soft_) return true;
  if (hard_state() != prev_hard_) return true;
  if (log_.HasEntriesToPersist() || log_.SnapshotToPersist()) return true;
  return HasPendingOutput() || HasCommittedEntriesToApply();
}

Ready Raft::GetReady() {
  RAFT_ASSERT(!outstanding_, "GetReady while Ready {} is not advanced", outstanding_->sequence);
  FlushReadRound();
  Ready rd;
  Outstanding rec;
  if (const SoftState ss = soft_state(); ss != prev_soft_) {
    rd.soft_state = ss;
    prev_soft_ = ss;
  }
  if (const HardState hs = hard_state(); hs != prev_hard_) {
    rd.hard_state = hs;
    rd.must_sync = hs.term != prev_hard_.term || hs.vote != prev_hard_.vote;
    prev_hard_ = hs;
  }
  rd.snapshot = log_.SnapshotToPersist();
  if (rd.snapshot) {
    rec.snapshot_index = rd.snapshot->index;
    applying_ = std::max(applying_, rd.snapshot->index);
  }
  rd.entries = log_.EntriesToPersist();
  if (!rd.entries.empty()) rec.last_entry = {rd.entries.back().index, rd.entries.back().term};
  rd.committed_entries = NextCommittedEntries();
  rd.durable_committed = CountDurable(rd.committed_entries);
  if (!rd.committed_entries.empty()) {
    rec.applied_to = rd.committed_entries.back().index;
    applying_ = *rec.applied_to;
    for (const Entry& e : rd.committed_entries) {
      rec.applied_bytes += e.data.size();
      if (e.type == EntryType::kConfChange) rec.conf_changes.push_back(e);
    }
  }
  rd.messages = TakeMessages();
  rd.messages_after_persist = TakeMessagesAfterPersist();
  rd.read_states = TakeReadStates();
  if (TakeConfChanged()) rd.conf_state = conf_;
  rd.must_sync = rd.must_sync || !rd.entries.empty() || rd.snapshot.has_value();
  log_.MarkInProgress();
  rec.must_sync = rd.must_sync;
  rec.handed_out_tick = now_;
  rec.sequence = ++ready_sequence_;
  rd.sequence = rec.sequence;
  outstanding_ = std::move(rec);
  return rd;
}

void Raft::Advance(const Ready& ready) {
  RAFT_ASSERT(outstanding_.has_value(), "Advance without an outstanding Ready");
  RAFT_ASSERT(ready.sequence == outstanding_->sequence, "Advance of Ready {} but {} is outstanding",
              ready.sequence, outstanding_->sequence);
  Outstanding rec = std::move(*outstanding_);
  outstanding_.reset();
  if (rec.snapshot_index) OnSnapshotPersisted(*rec.snapshot_index);
  if (rec.last_entry) OnPersisted(rec.last_entry->first, rec.last_entry->second);
  if (rec.must_sync) ObservePersistLatency(now_ - rec.handed_out_tick);
  if (rec.applied_to) OnApplied(*rec.applied_to, rec.conf_changes, rec.applied_bytes);
}

void Raft::OnPersisted(LogIndex index, Term term) {
  log_.StableTo(index, term);
  if (role_ != Role::kLeader) return;
  Progress& self = SelfProgress();
  if (!self.MaybeUpdate(log_.DurableIndex())) return;
  durability_stall_elapsed_ = 0;
  // The leader counts itself toward the commit quorum only for durable entries.
  if (MaybeCommit()) AfterCommitAdvanced();
}

void Raft::OnSnapshotPersisted(LogIndex index) {
  log_.StableSnapshotTo(index);
  applied_ = std::max(applied_, index);
}

void Raft::OnApplied(LogIndex index, const std::vector<Entry>& conf_changes, std::uint64_t bytes) {
  applied_ = std::max(applied_, index);
  if (role_ == Role::kLeader) uncommitted_bytes_ -= std::min(uncommitted_bytes_, bytes);
  for (const Entry& e : conf_changes) ApplyConfChangeEntry(e);
  if (deferred_transfer_term_ != Term(0) && conf_changes.size() > 0) {
    if (deferred_transfer_term_ != term_ || role_ != Role::kFollower ||
        now_ - deferred_transfer_tick_ > timeout_base_) {
      deferred_transfer_term_ = Term(0);
    } else if (!HasUnappliedConfChanges()) {
      Log(LogLevel::kInfo, "conf changes applied: running the deferred transfer campaign");
      StartCampaign(/*transfer=*/true);
    }
  }
}

std::vector<Message> Raft::TakeMessages() {
  std::vector<Message> out;
  out.swap(messages_);
  return out;
}

std::vector<Message> Raft::TakeMessagesAfterPersist() {
  std::vector<Message> out;
  out.swap(messages_after_persist_);
  return out;
}

std::vector<ReadState> Raft::TakeReadStates() {
  std::vector<ReadState> out;
  out.swap(read_states_);
  return out;
}

bool Raft::TakeConfChanged() {
  const bool changed = conf_changed_;
  conf_changed_ = false;
  return changed;
}

}  // namespace epoch::raft
