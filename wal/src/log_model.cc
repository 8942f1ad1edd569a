// LogModel: replay semantics of the WAL records (wal/FORMAT.md §5).
#include "log_model.h"

#include <fmt/format.h>

namespace epoch::wal {

Slot* LogModel::Find(LogIndex index) {
  if (index < first_ || index > LastIndex()) return nullptr;
  return &slots_[index - first_];
}

const Slot* LogModel::Find(LogIndex index) const {
  return const_cast<LogModel*>(this)->Find(index);
}

void LogModel::Reset(LogIndex first) {
  slots_.clear();
  cached_bytes_ = 0;
  first_ = first;
  evict_from_ = first;
}

void LogModel::PopBack() {
  if (slots_.back().cached) cached_bytes_ -= slots_.back().data.size();
  slots_.pop_back();
}

Status LogModel::ApplyCheckpoint(const format::Checkpoint& c, bool initialise) {
  if (initialise) {
    if (c.next_index < c.snapshot.index + 1) {
      return Status::Corruption(fmt::format("checkpoint next_index {} is not after snapshot {}",
                                            c.next_index, c.snapshot.index));
    }
    hard_state_ = c.hard_state;
    snapshot_ = c.snapshot;
    Reset(c.next_index);
    return Status::Ok();
  }
  const format::Checkpoint mine = MakeCheckpoint();
  if (!(mine == c)) {
    return Status::Corruption(fmt::format(
        "checkpoint disagrees with the log replayed so far (checkpoint: term {} vote {} commit {} "
        "snapshot {}@{} next {}; replayed: term {} vote {} commit {} snapshot {}@{} next {})",
        c.hard_state.term, c.hard_state.vote, c.hard_state.commit, c.snapshot.index,
        c.snapshot.term, c.next_index, mine.hard_state.term, mine.hard_state.vote,
        mine.hard_state.commit, mine.snapshot.index, mine.snapshot.term, mine.next_index));
  }
  return Status::Ok();
}

Status LogModel::ApplyEntry(LogIndex index, Slot slot) {
  if (index != LastIndex() + 1) {
    return Status::Corruption(
        fmt::format("entry {} does not follow the last index {}", index, LastIndex()));
  }
  if (slot.cached) cached_bytes_ += slot.data.size();
  slots_.push_back(std::move(slot));
  return Status::Ok();
}

Status LogModel::ApplyTruncate(LogIndex index) {
  if (index <= snapshot_.index || index > LastIndex() + 1) {
    return Status::Corruption(
        fmt::format("truncate at {} outside ({}, {}]", index, snapshot_.index, LastIndex() + 1));
  }
  if (index < first_) {
    // The truncated entries are in deleted segments; a later snapshot must cover them.
    Reset(index);
    return Status::Ok();
  }
  while (LastIndex() >= index) PopBack();
  if (evict_from_ > index) evict_from_ = index;
  return Status::Ok();
}

bool LogModel::SnapshotMatchesLog(const raft::SnapshotMeta& meta) const {
  if (meta.index == snapshot_.index) return meta.term == snapshot_.term;
  const Slot* slot = Find(meta.index);
  return slot != nullptr && slot->term == meta.term;
}

Status LogModel::ApplySnapshot(const format::SnapshotRecord& s) {
  const raft::SnapshotMeta& meta = s.meta;
  if (meta.index < snapshot_.index) {
    return Status::Corruption(fmt::format("snapshot {} is older than the current snapshot {}",
                                          meta.index, snapshot_.index));
  }
  if (s.discard_log) {
    snapshot_ = meta;
    Reset(meta.index + 1);
    return Status::Ok();
  }
  if (meta.index > LastIndex()) {
    return Status::Corruption(
        fmt::format("snapshot {} keeps the log but the log ends at {}", meta.index, LastIndex()));
  }
  if (const Slot* slot = Find(meta.index); slot != nullptr && slot->term != meta.term) {
    return Status::Corruption(fmt::format("snapshot {}@{} keeps the log but entry {} has term {}",
                                          meta.index, meta.term, meta.index, slot->term));
  }
  while (!slots_.empty() && first_ <= meta.index) {
    if (slots_.front().cached) cached_bytes_ -= slots_.front().data.size();
    slots_.pop_front();
    ++first_;
  }
  if (evict_from_ < first_) evict_from_ = first_;
  snapshot_ = meta;
  return Status::Ok();
}

Status LogModel::CheckGapFree() const {
  if (first_ != snapshot_.index + 1) {
    return Status::Corruption(fmt::format(
        "entries [{}, {}) are missing: neither in a segment nor covered by the snapshot at {}",
        snapshot_.index + 1, first_, snapshot_.index));
  }
  return Status::Ok();
}

void LogModel::EvictTo(std::uint64_t budget) {
  if (evict_from_ < first_) evict_from_ = first_;
  while (cached_bytes_ > budget && evict_from_ <= LastIndex()) {
    Slot& slot = slots_[evict_from_ - first_];
    if (slot.segment == 0) break;  // not written yet: it and everything after stay cached
    if (slot.cached) {
      cached_bytes_ -= slot.data.size();
      slot.cached = false;
      std::string().swap(slot.data);
    }
    ++evict_from_;
  }
}

}  // namespace epoch::wal
