// LogReader: the read-only view of the persisted Raft log that the core consults (in the style of
// etcd raft's Storage). The core never writes through it; writes leave the core only via Ready and
// are made durable by the driver (wal::Wal in production, raft::MemoryLog in tests and simulation).
//
// Contract:
//   - The log holds entries [FirstIndex(), LastIndex()]; everything before FirstIndex() is covered
//     by LastSnapshot() (FirstIndex() == LastSnapshot().index + 1). An empty log has
//     FirstIndex() == LastIndex() + 1.
//   - TermAt(i) is defined for i in [FirstIndex() - 1, LastIndex()] (FirstIndex() - 1 answers with
//     the snapshot's term; index 0 has term 0); std::nullopt outside that range. The caller tells
//     "compacted" (i < FirstIndex() - 1) from "not yet there" (i > LastIndex()) by comparing.
//   - Entries(lo, hi, max_bytes) requires FirstIndex() <= lo <= hi <= LastIndex() + 1 and returns
//     entries [lo, hi), stopping early once the data size exceeds max_bytes, but always returning
//     at least one entry when lo < hi.
//   - Reads do not fail: an implementation that meets an I/O error reading persisted entries stops
//     the process (fail-stop, docs/conventions.md §4), because a node that cannot read its own log
//     cannot safely take part in the protocol.
//
// Threading: called only from the thread that drives the core.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "epoch/raft/types.h"

namespace epoch::raft {

class LogReader {
 public:
  virtual ~LogReader() = default;

  // Hard state and snapshot found at startup; the core restores itself from these.
  [[nodiscard]] virtual HardState InitialHardState() const = 0;
  [[nodiscard]] virtual SnapshotMeta LastSnapshot() const = 0;

  [[nodiscard]] virtual LogIndex FirstIndex() const = 0;
  [[nodiscard]] virtual LogIndex LastIndex() const = 0;
  [[nodiscard]] virtual std::optional<Term> TermAt(LogIndex index) const = 0;
  [[nodiscard]] virtual std::vector<Entry> Entries(LogIndex lo, LogIndex hi,
                                                   std::uint64_t max_bytes) const = 0;
};

}  // namespace epoch::raft
