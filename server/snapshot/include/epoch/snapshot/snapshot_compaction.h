// Automatic Raft log compaction: when to compact and up to which index (server/SNAPSHOT.md §4).
//
// The rule: once the log holds max(`trigger_entries`, `keep_entries` + `trigger_entries` / 2)
// applied entries past the last snapshot, flush the state machine (RocksDB's WAL is off, so only
// flushed state is durable) and compact the log up to min(durable applied index, applied -
// keep_entries): followers that lag by less than keep_entries catch up from the log, not from a
// snapshot, whatever the trigger (etcd keeps its SnapshotCatchUpEntries with any
// --snapshot-count). Once `trigger_bytes` of entry data were appended since the last compaction,
// the same, keeping min(keep_entries, half of the entries past the snapshot). Never past a
// membership change that is not older than the target (the snapshot records the membership as of
// its index, and the driver only knows the current one).
//
// Who calls it: SnapshotManager::AfterAdvance on the driver's strand. Threading: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "epoch/strong_int.h"

namespace epoch::server {

struct CompactionOptions {
  // etcd's --snapshot-count (its default is 100,000). Each compaction flushes RocksDB's
  // memtables, so max(this minus keep_entries, half of this) is the flush period under load. 20,000
  // and 40,000 were measured (bench/kv/PROFILE.md): within the noise of 10,000 over 9 alternated
  // pairs, with 3x larger flushes competing with the WAL's fsyncs; 100,000 was ~12 % slower (a
  // memtable that is never flushed makes inserts and lookups slower). A restart replays at most
  // this many.
  std::uint64_t trigger_entries = 10'000;
  std::uint64_t trigger_bytes = 64ULL << 20;
  // etcd's SnapshotCatchUpEntries.
  std::uint64_t keep_entries = 5'000;
  bool enabled = true;
};

struct CompactionInput {
  LogIndex snapshot_index;    // the log's current snapshot (FirstIndex() - 1)
  LogIndex applied;           // applied by both the core and the state machine
  std::uint64_t bytes_since;  // entry bytes appended since the last compaction
  LogIndex last_conf_change;  // index of the last applied membership change (0: none)
};

// The index to compact to if compaction is due now (before flushing), or nullopt.
[[nodiscard]] std::optional<LogIndex> CompactionTarget(const CompactionOptions& options,
                                                       const CompactionInput& input);

}  // namespace epoch::server
