// MemoryLog: the in-memory twin of the WAL (wal::Wal) behind the LogReader interface. Tests and
// the simulator use one per node as its durable log: the driver writes what a Ready asks for
// (SetHardState, ApplySnapshot, Append) and the core reads it back through LogReader. A simulated
// crash keeps the MemoryLog (the "disk") and rebuilds the Node from it.
//
// Contract violations (appending with a gap, compacting past the last index) are programming
// errors and abort with a message.
//
// Threading: not synchronised; one thread (the driver's) at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "epoch/raft/log_reader.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

class MemoryLog final : public LogReader {
 public:
  // An empty log: no snapshot, no entries, empty hard state (a node that will join a cluster).
  MemoryLog() = default;
  // An initial member: starts from BootstrapSnapshot(voters) with HardState{1, none, 1}.
  static MemoryLog Bootstrapped(std::vector<NodeId> voters);

  // LogReader.
  [[nodiscard]] HardState InitialHardState() const override { return hard_state_; }
  [[nodiscard]] SnapshotMeta LastSnapshot() const override { return snapshot_; }
  [[nodiscard]] LogIndex FirstIndex() const override;
  [[nodiscard]] LogIndex LastIndex() const override;
  [[nodiscard]] std::optional<Term> TermAt(LogIndex index) const override;
  [[nodiscard]] std::vector<Entry> Entries(LogIndex lo, LogIndex hi,
                                           std::uint64_t max_bytes) const override;

  // Writes, as the driver performs them for a Ready.
  void SetHardState(const HardState& hard_state) { hard_state_ = hard_state; }
  [[nodiscard]] const HardState& hard_state() const { return hard_state_; }
  // Appends `entries` (contiguous, ascending). entries.front().index must be in
  // [FirstIndex(), LastIndex() + 1]; any existing suffix from that index on is discarded first.
  void Append(const std::vector<Entry>& entries);
  // Replaces the log with a snapshot: every entry is discarded, FirstIndex() becomes
  // meta.index + 1. (Installing the state-machine image is the caller's business.)
  void ApplySnapshot(const SnapshotMeta& meta);
  // Log compaction after the state machine took a snapshot at `index` (<= LastIndex()) whose
  // membership was `conf`: entries <= index are discarded, LastSnapshot() becomes
  // {index, TermAt(index), conf}. No-op when index < FirstIndex().
  void Compact(LogIndex index, const ConfState& conf);

  // Sum of the data sizes of the stored entries.
  [[nodiscard]] std::uint64_t EntryBytes() const { return entry_bytes_; }

 private:
  HardState hard_state_;
  SnapshotMeta snapshot_;
  // entries_[i].index == snapshot_.index + 1 + i (invariant: contiguous after the snapshot).
  std::vector<Entry> entries_;
  std::uint64_t entry_bytes_ = 0;
};

}  // namespace epoch::raft
