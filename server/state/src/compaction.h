// Compaction of the MVCC history (etcd Compact; docs/etcd-compatibility.md §3.3).
//
// Compacting at revision C drops, for every key, each history entry with main revision <= C
// except the key's last entry at or before C when that entry is a Put (the key's value as of C).
// Reads at revisions >= C stay exact; reads below C fail as compacted. Unlike etcd we also keep a
// tombstone whose revision is exactly C (until the next compaction), so a watch resuming at
// start_revision = C — what clients do after ErrCompacted — still receives that revision's
// DELETE events. Compacting to C1 and then to C2 > C1 leaves exactly what compacting to C2 alone
// leaves, so a compactor that is behind only needs the latest target.
//
// Two steps, as etcd's (mvcc scheduleCompaction):
//  1. Logical, at apply (entry_apply.cc): the compact revision is recorded in the store meta, in
//     the entry's own write batch, and staged in the KeyIndex. From that batch on every replica
//     refuses reads below C; nothing else is done on the Raft thread.
//  2. Physical, here, on the Compactor's own thread: the superseded entries leave the KeyIndex
//     and their revision records ('r') leave RocksDB, in batches of at most `batch_entries`, each
//     batch one KeyIndex::CompactSome call (the index's exclusive lock, once) and one RocksDB
//     write of its own, with `batch_interval` between batches. The last batch of a pass also
//     writes the meta value `compact_finished` = C: every record compacting to C removes is
//     gone. RocksDB writes reach the disk in order, so after a crash a store whose
//     compact_finished is below its compact_revision resumes the pass (KvStore::Open, and
//     ReplaceWithCheckpoint for a snapshot image, which may carry a pass in progress).
//
// Leftovers — records the compactor has not removed yet — are never part of an answer: they all
// have main < C (a key has one entry per revision, and its entry at C is kept), and
//  - Range, txn Ranges at a revision and watch prev_kv go through the KeyIndex, which refuses or
//    filters below C (key_index.h);
//  - Watch history (ReadEvents) starts at or above C, and Range at the current revision reads
//    the latest table, which compaction never touches;
//  - HashKV and StateHash skip them (kv_store_read.cc, HashHistory), so hashes agree between
//    members whatever their compactors' progress;
//  - a snapshot image carries them with its compact_finished, and its installer resumes the pass.
// They still take disk space until removed (etcd_mvcc_db_total_size_in_bytes counts them).
//
// Thread-safety: Schedule, WhenFinished, finished(): any thread. Reset, Pause: the applier, with
// the pass held off (Pause). RunBatch: the compactor's thread, or a test's with no thread.
#pragma once

#include <rocksdb/db.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "epoch/state/kv_store.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "key_index.h"
#include "store_reader.h"

namespace epoch::server {

struct CompactorOptions {
  // Superseded entries removed per batch (etcd's compactionBatchLimit).
  std::size_t batch_entries = 1000;
  // Pause between two batches, so the applier and readers get the index lock and the disk
  // (etcd's compactionSleepInterval).
  std::chrono::milliseconds batch_interval{10};
  // Off: no thread; only RunBatch calls (tests) remove anything.
  bool background = true;
};

class Compactor {
 public:
  using Done = std::function<void(const Status&)>;

  Compactor(rocksdb::DB* db, StoreFamilies families, KeyIndex* index, CompactorOptions options,
            CompactionMetrics* metrics);
  ~Compactor();
  Compactor(const Compactor&) = delete;
  Compactor& operator=(const Compactor&) = delete;

  // Where the work stands: `finished` (the stored compact_finished; -1 when absent) and
  // `target` (the compact revision). Before Start, or under Pause.
  void Reset(Revision finished, Revision target);
  // Starts the thread (options.background); Stop joins it and fails the waiters. Idempotent.
  void Start();
  void Stop();
  // A compaction to `target` was published: the pass moves on to it (a later target only).
  void Schedule(Revision target);
  // Calls `done` once every record a compaction to `rev` removes is gone from this store: at once
  // (on the calling thread) when it already is, else on the compactor's thread. Unavailable if
  // the compactor stops first.
  void WhenFinished(Revision rev, Done done);
  [[nodiscard]] Revision finished() const;
  // Holds batches off while the applier replaces the store under them (a snapshot install).
  [[nodiscard]] std::unique_lock<std::mutex> Pause() { return std::unique_lock(run_mu_); }

  // One batch on the calling thread. Returns whether work is left.
  Result<bool> RunBatch();

 private:
  void Loop();
  // Under mu_: the waiters `finished_` satisfies, removed from waiters_.
  std::vector<Done> TakeReadyLocked();
  void FailWaiters(const Status& s);

  rocksdb::DB* const db_;
  const StoreFamilies families_;
  KeyIndex* const index_;
  const CompactorOptions options_;
  CompactionMetrics* const metrics_;
  // One batch at a time; held for a whole batch, and by Pause.
  std::mutex run_mu_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  // Invariant: finished_ <= target_ except after a Reset from an image (then no work).
  Revision finished_{-1};
  Revision target_{-1};
  // The pass in progress: its target and the key it continues from (keys before it are done).
  Revision pass_target_{-1};
  std::string cursor_;
  std::chrono::steady_clock::time_point pass_start_;
  std::vector<std::pair<Revision, Done>> waiters_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace epoch::server
