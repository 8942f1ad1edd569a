// LogModel: the WAL's in-memory picture of the log (hard state, snapshot, entries with their
// location on disk and, for recent ones, their data), and the one implementation of the replay
// semantics of wal/FORMAT.md §5. Recovery applies decoded records to it; wal::Wal applies the
// same operations when it accepts an append, so what is written and what is held in memory cannot
// disagree.
//
// Thread-safety: none; wal::Wal guards its instance with its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "epoch/raft/types.h"
#include "epoch/status.h"
#include "epoch/wal/format.h"

namespace epoch::wal {

// What the WAL remembers about one entry.
struct Slot {
  Term term;
  raft::EntryType type = raft::EntryType::kNormal;
  std::uint64_t op_seq = 0;        // the Append call that wrote it (matches placement updates)
  std::uint64_t segment = 0;       // 0 until its frame has been written
  std::uint64_t offset = 0;        // of its record header in the segment file
  std::uint32_t record_bytes = 0;  // header + body
  std::uint64_t data_bytes = 0;    // size of the entry's data (known even when not cached)
  bool cached = false;
  std::string data;  // the entry's data when cached
};

class LogModel {
 public:
  [[nodiscard]] const raft::HardState& hard_state() const { return hard_state_; }
  [[nodiscard]] const raft::SnapshotMeta& snapshot() const { return snapshot_; }

  // Entries are [FirstIndex(), LastIndex()]; LastIndex() == FirstIndex() - 1 when empty.
  // Invariant after a successful replay and after every accepted operation:
  //   FirstIndex() == snapshot().index + 1 (gap-free). During replay FirstIndex() may be larger
  //   while the entries in between are in segments that were deleted (FORMAT.md §5, checkpoint).
  [[nodiscard]] LogIndex FirstIndex() const { return first_; }
  [[nodiscard]] LogIndex LastIndex() const { return first_ + slots_.size() - 1; }
  [[nodiscard]] std::size_t size() const { return slots_.size(); }
  [[nodiscard]] Slot* Find(LogIndex index);
  [[nodiscard]] const Slot* Find(LogIndex index) const;
  [[nodiscard]] format::Checkpoint MakeCheckpoint() const {
    return format::Checkpoint{hard_state_, snapshot_, LastIndex() + 1};
  }

  // --- Replay semantics (FORMAT.md §5). Each returns Corruption if the operation is not allowed
  // at this point; the model is unchanged then.
  // `initialise`: this is the first record of the first segment replayed.
  [[nodiscard]] Status ApplyCheckpoint(const format::Checkpoint& c, bool initialise);
  [[nodiscard]] Status ApplyEntry(LogIndex index, Slot slot);
  [[nodiscard]] Status ApplyTruncate(LogIndex index);
  void ApplyHardState(const raft::HardState& hs) { hard_state_ = hs; }
  [[nodiscard]] Status ApplySnapshot(const format::SnapshotRecord& s);
  // The end-of-replay check: FirstIndex() == snapshot().index + 1.
  [[nodiscard]] Status CheckGapFree() const;

  // Whether a snapshot with this meta keeps the log after meta.index (Raft §7: the log has an
  // entry at meta.index with meta.term) or discards the whole log.
  [[nodiscard]] bool SnapshotMatchesLog(const raft::SnapshotMeta& meta) const;

  // Drops the data of the oldest placed (on-disk) entries until at most `budget` bytes of entry
  // data stay cached. Entries not yet written are never evicted.
  void EvictTo(std::uint64_t budget);
  [[nodiscard]] std::uint64_t cached_bytes() const { return cached_bytes_; }

 private:
  void Reset(LogIndex first);
  void PopBack();

  raft::HardState hard_state_;
  raft::SnapshotMeta snapshot_;
  LogIndex first_{1};
  std::deque<Slot> slots_;          // slots_[i] is entry first_ + i
  std::uint64_t cached_bytes_ = 0;  // sum of data.size() over cached slots
  LogIndex evict_from_{1};          // every slot below it is uncached (eviction cursor)
};

}  // namespace epoch::wal
