// Compaction of the MVCC history (etcd Compact; docs/etcd-compatibility.md §3.3).
//
// Compacting at revision C drops, for every key, each history entry with main revision <= C
// except the key's last entry at or before C when that entry is a Put (the key's value as of C).
// Reads at revisions >= C stay exact; reads below C fail as compacted. Unlike etcd we also keep a
// tombstone whose revision is exactly C (until the next compaction), so a watch resuming at
// start_revision = C — what clients do after ErrCompacted — still receives that revision's
// DELETE events.
//
// The work is done synchronously, inside the applied entry's write batch.
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include <cstdint>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "key_index.h"
#include "store_reader.h"

namespace epoch::server {

struct CompactionStats {
  std::int64_t entries_removed = 0;
};

// Removes the history below `compact_to`: the revision records from the pending batch, the
// index entries when the batch is published (KeyIndex::StageCompaction). `index` holds every
// earlier entry's writes published (the batch before a compaction is written first:
// ReadsHistory).
Result<CompactionStats> CompactHistory(KeyIndex* index, const StoreFamilies& families,
                                       rocksdb::WriteBatchWithIndex* batch, Revision compact_to);

}  // namespace epoch::server
