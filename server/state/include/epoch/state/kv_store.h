// KvStore: Epoch's replicated state machine — etcd's MVCC key space, the lease table, the cluster
// clock and the idempotency table — on RocksDB (docs/formats.md §3, docs/etcd-compatibility.md §3).
//
// Who calls it: the Raft driver applies committed entries with Apply()/ApplyBatch() in log order;
// gRPC handlers read with Range()/ReadOnlyTxn(); Watch reads history with ReadEvents(); snapshots
// use CreateCheckpoint()/OpenFromCheckpoint(); Maintenance uses HashKV()/Status numbers.
//
// Durability: RocksDB's own WAL is off. Each ApplyBatch is one atomic RocksDB write batch that
// also records the applied log index, so after a crash the store is exactly the state after some
// applied index and the node replays the Raft log from AppliedIndex() + 1. Writes become durable
// only when RocksDB flushes its memtable: the driver must not discard Raft log entries above the
// index returned by Flush() (or contained in a checkpoint).
//
// Threading: one applier thread calls the mutating methods (Apply*, ReplaceWithCheckpoint);
// Flush() and CreateCheckpoint() may run on any thread. The store's own compactor thread removes
// compacted history in the background (src/compaction.h). Any number of threads may call the const
// read methods concurrently with it; each read sees one consistent applied state (a RocksDB
// snapshot taken together with the revision it belongs to).
#pragma once

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "epoch/metrics_text.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/cluster_timing.h"
#include "epoch/state/kv_validation.h"
#include "epoch/state/member_table.h"
#include "epoch/state/txn_read_bound.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.pb.h"
#include "mvccpb/kv.pb.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class WriteBatchWithIndex;
}  // namespace rocksdb

namespace epoch::server {

struct StoreFamilies;

struct KvStoreOptions {
  KvLimits limits;
  // Largest lease TTL accepted (etcd's MaxLeaseTTL is 9,000,000,000 s).
  std::int64_t max_lease_ttl_ms = 9'000'000'000'000;
  // Idempotency keys: default and maximum time a response is remembered.
  std::int64_t idempotency_default_ttl_ms = 10 * 60 * 1000;
  std::int64_t idempotency_max_ttl_ms = 24 * 60 * 60 * 1000;
  // Expired idempotency records removed per applied request (bounds the work of one apply).
  int idempotency_prune_per_apply = 16;
  // Close without flushing memtables: what a crash does. Tests only.
  bool skip_flush_on_close = false;
  // Off: every PUT event carries its key's previous version whole (prev_kv with the value). On:
  // only while some consumer needs previous values (AddPrevValueReaders); otherwise a put that
  // needs no more than the previous version's metadata takes it from the applier's cache
  // (src/latest_cache.h) and its event carries no prev_kv. A consumer that finds one missing
  // (a PUT with version > 1 and no prev_kv) reads the key at mod_revision - 1 from history, as
  // etcd's watch does (ReadEvents with_prev_kv). epochd turns it on; its watch hub counts the
  // watchers that asked for prev_kv.
  bool lazy_prev_values = false;
  // Physical compaction (src/compaction.h): superseded history entries removed per batch, and
  // the pause between batches (etcd's compactionBatchLimit and compactionSleepInterval).
  std::size_t compaction_batch_entries = 1000;
  std::int64_t compaction_batch_interval_ms = 10;
  // Off: no compactor thread; compacted history stays until RunCompactionBatch. Tests only.
  bool background_compaction = true;
};

// One committed log entry to apply.
struct ApplyInput {
  LogIndex index;
  const v1::InternalRequest* request;
};

// The outcome of applying one entry. `status` is a deterministic request error (etcd message, see
// etcd_errors.h) — every replica computes the same one and the entry still counts as applied.
struct ApplyResult {
  Status status;
  v1::InternalResponse response;
  // Store revision after this entry.
  Revision revision;
  // The changes this entry made, in (revision, sub-revision) order, prev_kv filled in (a PUT's
  // may be missing under KvStoreOptions::lazy_prev_values).
  std::vector<mvccpb::Event> events;
};

// Events read from history for Watch.
struct EventBatch {
  std::vector<mvccpb::Event> events;
  // Revision of each event (same index as `events`).
  std::vector<Revision> revisions;
  // The first revision not returned yet (continue from here).
  Revision next;
  // The store revision the read saw.
  Revision current;
};

struct KvHash {
  std::uint32_t hash = 0;
  Revision compact_revision;
  Revision hash_revision;
};

struct LeaseInfo {
  LeaseId id;
  std::int64_t ttl_ms = 0;
  std::int64_t deadline_cluster_ms = 0;
};

// An active alarm (etcd's AlarmMember): raised by or for one member, it holds for the whole
// cluster. Part of the replicated state (server/README.md "Alarms and the space quota").
struct StoreAlarm {
  std::uint64_t member = 0;
  etcdserverpb::AlarmType type = etcdserverpb::NONE;
  friend auto operator<=>(const StoreAlarm&, const StoreAlarm&) = default;
};

// A member's attributes as it published them (InternalRequest.member_attributes).
struct PublishedMember {
  std::uint64_t id = 0;
  std::string name;
  std::vector<std::string> client_urls;
  friend bool operator==(const PublishedMember&, const PublishedMember&) = default;
};
using PublishedMembers = std::vector<PublishedMember>;  // sorted by id

class LatestCache;
class KeyIndex;
class Compactor;

// etcd 3.4's mvcc compaction metrics (mvcc/metrics.go), in milliseconds as etcd's; observed by
// the compactor's thread (src/compaction.h), read from any.
struct CompactionMetrics {
  // One batch: index lock held + RocksDB write (etcd_debugging_mvcc_db_compaction_pause_...).
  Histogram batch_pause{Histogram::ExponentialBuckets(1, 2, 13)};
  // The index part of a batch (etcd_debugging_mvcc_index_compaction_pause_duration_...).
  Histogram index_pause{Histogram::ExponentialBuckets(0.5, 2, 12)};
  // One pass to a target, first batch to last (etcd_debugging_mvcc_db_compaction_total_...).
  Histogram pass_total{Histogram::ExponentialBuckets(100, 2, 14)};
  // Revision records deleted (etcd_debugging_mvcc_db_compaction_keys_total).
  std::atomic<std::uint64_t> records_deleted{0};
  // A duration into a histogram whose bounds are milliseconds: Histogram counts seconds, so the
  // duration is scaled by 1000 (its _sum then reads in milliseconds too).
  static void ObserveMs(Histogram& h, std::chrono::nanoseconds d) { h.Observe(d * 1000); }
};

class KvStore {
 public:
  // Opens (creating if missing) the store in directory `dir`.
  static Result<std::unique_ptr<KvStore>> Open(const std::string& dir, KvStoreOptions options);
  // Replaces `dir` with a copy of the checkpoint in `checkpoint_dir` and opens it.
  static Result<std::unique_ptr<KvStore>> OpenFromCheckpoint(const std::string& checkpoint_dir,
                                                             const std::string& dir,
                                                             KvStoreOptions options);
  ~KvStore();
  KvStore(const KvStore&) = delete;
  KvStore& operator=(const KvStore&) = delete;

  // --- applier thread ---------------------------------------------------------------------

  // Applies entries in order (indexes strictly increasing and above AppliedIndex()) in one
  // RocksDB write batch. A non-OK Result is a storage failure: the batch was not written and the
  // node must stop (fail-stop). Request errors are in each ApplyResult::status.
  Result<std::vector<ApplyResult>> ApplyBatch(std::span<const ApplyInput> inputs);
  Result<ApplyResult> Apply(LogIndex index, const v1::InternalRequest& request);
  // Records an entry that does not touch the state machine (leader no-op, conf change).
  Status ApplyEmpty(LogIndex index);
  // Flushes memtables; returns the applied index that is now durable. Any thread (the snapshot
  // manager flushes on its I/O thread while the applier goes on).
  Result<LogIndex> Flush();
  // Writes a RocksDB checkpoint (a consistent, openable copy) into the new directory `dir` and
  // returns the applied index and revision it contains, read from the image. Any thread: the
  // image is the state after one ApplyBatch, whichever the applier had written when RocksDB
  // switched the memtables.
  struct ImageMeta {
    LogIndex applied;
    Revision revision;
  };
  Result<ImageMeta> CreateCheckpoint(const std::string& dir);
  // Replaces the whole state with the checkpoint in `checkpoint_dir` (a Raft snapshot received
  // from the leader), in place: one ingested SST file deletes every key and brings every key of
  // the checkpoint, so readers see the old state or the new one, never a mix, and the new state
  // is durable when this returns (before the caller records the snapshot in the Raft log). The
  // file is written next to `checkpoint_dir` (same file system) and streamed: the image is never
  // in memory. FailedPrecondition if the image's applied index is below AppliedIndex() (it would
  // move the state machine backwards).
  Status ReplaceWithCheckpoint(const std::string& checkpoint_dir);

  // --- any thread -------------------------------------------------------------------------

  [[nodiscard]] LogIndex AppliedIndex() const;
  [[nodiscard]] Revision CurrentRevision() const;
  // -1 until the first compaction (etcd's compactMainRev).
  [[nodiscard]] Revision CompactRevision() const;
  // Physical compaction (src/compaction.h): every record that compacting to this revision
  // removes is gone from this member's store (etcd's finishedCompactRev). At most
  // CompactRevision(); below it while the compactor works in the background.
  [[nodiscard]] Revision CompactFinishedRevision() const;
  // Calls `done` once CompactFinishedRevision() >= `rev` (etcd's Compact with physical=true):
  // at once on the calling thread if it already is, else on the compactor's thread; Unavailable
  // if the store closes first. `done` must not block.
  void WhenCompacted(Revision rev, std::function<void(const Status&)> done);
  // Stops the compactor's thread and answers its waiters Unavailable (the node shutting down;
  // what is left resumes at the next open). Any thread; idempotent.
  void StopCompactor();
  // Runs one batch of the physical compaction on the calling thread; returns whether work is
  // left. For tests that turn background_compaction off.
  Result<bool> RunCompactionBatch();
  // etcd's mvcc compaction metrics.
  [[nodiscard]] const CompactionMetrics& compaction_metrics() const { return *compaction_metrics_; }
  [[nodiscard]] std::int64_t ClusterTimeMs() const;
  // Under KvStoreOptions::lazy_prev_values: `delta` more (or fewer) consumers of applied events
  // need PUT events' previous values. Takes effect from the next ApplyBatch; a consumer must
  // still handle events applied before it (see lazy_prev_values). Const because it only counts.
  void AddPrevValueReaders(int delta) const { prev_value_readers_.fetch_add(delta); }

  // etcd Range on the latest applied state. Validates the request.
  Result<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request) const;
  // A txn with no writes (IsReadOnlyTxn), evaluated on the latest applied state.
  Result<etcdserverpb::TxnResponse> ReadOnlyTxn(const etcdserverpb::TxnRequest& request) const;
  // --max-txn-read-keys ahead of the log: kTxnReadTooLarge (and counted) when the reads of a
  // write txn (its compares, when `bound` counts them, and its Range ops on the path its compares
  // take on the latest applied state) pass `bound.max_keys` keys; Ok otherwise, or when telling
  // would cost more than the bound (src/kv_apply.h, PrecheckTxnReads). Visits at most
  // `bound.max_keys` + 1 keys and decodes no value of a Range op. A refusal
  // here means the txn was never proposed: it has no effect, so judging it on a state older than
  // the one it would apply on is safe; the apply-time bound stays for what gets through.
  Status PrecheckTxnReads(const etcdserverpb::TxnRequest& request, TxnReadBound bound) const;
  // History for Watch: events with revision in [start, current], at most about `max_events`
  // (never splitting a revision). Fails with etcd's "compacted" error when start is below the
  // compact revision. prev_kv is filled when `with_prev_kv`.
  Result<EventBatch> ReadEvents(Revision start, std::size_t max_events, bool with_prev_kv) const;
  // Maintenance.HashKV: hash of the MVCC history up to `revision` (0 = current).
  Result<KvHash> HashKV(Revision revision) const;
  // Hash of the whole replicated state except the applied index: equal on replicas that applied
  // the same entries (chaos convergence checks).
  Result<std::uint64_t> StateHash() const;

  Result<std::optional<LeaseInfo>> GetLease(LeaseId id) const;
  Result<std::vector<LeaseInfo>> Leases() const;
  Result<std::vector<std::string>> LeaseKeys(LeaseId id) const;
  // Leases whose deadline is at or before `now_cluster_ms` (the leader proposes their revocation).
  Result<std::vector<LeaseId>> ExpiredLeases(std::int64_t now_cluster_ms,
                                             std::size_t max_count) const;

  // Approximate bytes on disk and in memtables (Maintenance.Status dbSize, the space quota).
  [[nodiscard]] std::int64_t ApproximateSizeBytes() const;
  // Approximate bytes of live data: what a Defragment would leave (RocksDB's estimate of live
  // SST data plus the memtables); etcd_mvcc_db_total_size_in_use_in_bytes.
  [[nodiscard]] std::int64_t ApproximateLiveBytes() const;
  // The active alarms, sorted (Maintenance.Alarm GET, Status errors).
  [[nodiscard]] std::vector<StoreAlarm> Alarms() const;
  // The members' published attributes (never null).
  [[nodiscard]] std::shared_ptr<const PublishedMembers> Members() const;
  // The applied auth state (never null).
  [[nodiscard]] AuthStatePtr Auth() const;
  // The applied member table (never null; empty until seeded).
  [[nodiscard]] MemberTablePtr MemberTable() const;
  // The applied cluster timing (cluster_timing.h); null until recorded.
  [[nodiscard]] ClusterTimingPtr ClusterTiming() const;
  // Applier thread, before the first apply: records `table` (the initial cluster's) when the
  // store has no member table yet; a no-op otherwise. The seed is the bootstrap snapshot's
  // configuration, the same on every initial member, so it is written outside the log.
  Status SeedMemberTable(MemberTablePtr table);
  // Applier thread, before the first apply: `table` in place of the store's (a restored snapshot
  // starts a new cluster with the members of its --initial-cluster).
  Status ReplaceMemberTable(MemberTablePtr table);
  // Maintenance.Defragment: flushes, then compacts both column families whole, so that what
  // Compact and deletions removed leaves the disk. Any thread; blocks for the compaction.
  Status Defragment();
  // Size of the in-memory per-key history (src/key_index.h): keys and revisions it holds.
  struct IndexSize {
    std::size_t keys = 0;
    std::size_t revisions = 0;
    std::size_t live_keys = 0;  // keys not deleted (etcd_debugging_mvcc_keys_total)
  };
  [[nodiscard]] IndexSize IndexSizeNow() const;
  // The store's part of /metrics: revision, alarms, the in-memory index.
  void RenderMetrics(MetricsText& m) const;
  // Latency of each apply batch's RocksDB write (etcd_disk_backend_commit_duration_seconds,
  // with etcd's buckets). Observed on the applier thread; read from any.
  [[nodiscard]] const Histogram& commit_latency() const { return commit_latency_; }

  // Meta values persisted with every write batch. Applier-owned; readers copy it under mu_.
  struct Meta {
    LogIndex applied;
    Revision revision{1};
    Revision compact_revision{-1};
    std::int64_t cluster_time_ms = 0;
    // Sorted, no duplicates. A NOSPACE alarm caps the store: requests that need space fail.
    std::vector<StoreAlarm> alarms;
    // Shared, replaced whole when a member publishes (readers copy Meta: no deep copy per read).
    std::shared_ptr<const PublishedMembers> members = std::make_shared<const PublishedMembers>();
    // Users, roles, permissions (auth_state.h); replaced whole by each auth change.
    AuthStatePtr auth = std::make_shared<const AuthState>();
    // The member table (member_table.h); replaced whole by each membership change.
    MemberTablePtr member_table = std::make_shared<const v1::StoredMemberTable>();
    // The cluster timing (cluster_timing.h); replaced whole by each change, null until recorded.
    ClusterTimingPtr cluster_timing;
  };

 private:
  class ReadState;

  KvStore(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles,
          KvStoreOptions options, Meta meta);
  std::unique_ptr<ReadState> AcquireRead() const;
  Result<std::vector<ApplyResult>> ApplyBatchOrFail(std::span<const ApplyInput> inputs);
  Status WriteBatchAndPublish(rocksdb::WriteBatchWithIndex* batch, const Meta& meta);
  [[nodiscard]] StoreFamilies families() const;
  // A format-1 store (every table in the default family): moves its revision records into the
  // history family, durably.
  Status MigrateSingleFamily();
  // A format-1 or -2 store: drops the per-key history table and records the current format,
  // durably.
  Status DropIndexTable();
  // Rebuilds the KeyIndex from the revision records (open, snapshot install).
  Status RebuildIndex();

  std::unique_ptr<rocksdb::DB> db_;
  // The column families' handles, in StoreFamilies order (main, history); released before the
  // database closes.
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;
  const KvStoreOptions options_;
  // Guards meta_ and the pairing of (RocksDB write, meta_ update) with (snapshot, meta copy), so a
  // reader never sees a snapshot with another batch's revision.
  mutable std::mutex mu_;
  Meta meta_;
  // Applier thread only: no idempotency record expires before this cluster time (INT64_MIN:
  // unknown, scan once). See IdempotencyExpiryHint in src/idempotency.h.
  std::int64_t idempotency_earliest_expiry_ms_ = INT64_MIN;
  // Applier thread only: metadata of keys' latest versions (src/latest_cache.h).
  std::unique_ptr<LatestCache> latest_cache_;
  // Every key's revisions since the compact revision (src/key_index.h).
  std::unique_ptr<KeyIndex> index_;
  std::unique_ptr<CompactionMetrics> compaction_metrics_;
  // Removes compacted history in the background (src/compaction.h); stopped first by ~KvStore,
  // before the database closes.
  std::unique_ptr<Compactor> compactor_;
  mutable std::atomic<int> prev_value_readers_{0};
  // Txns this replica applied as failed for reading past their entry's txn_read_keys_max.
  std::atomic<std::uint64_t> txn_reads_refused_{0};
  // Txns PrecheckTxnReads refused before they were proposed (const: it only counts).
  mutable std::atomic<std::uint64_t> txn_reads_refused_early_{0};
  // etcd's backend commit buckets: ExponentialBuckets(0.001, 2, 14), 1 ms to 8.192 s.
  Histogram commit_latency_{Histogram::ExponentialBuckets(0.001, 2, 14)};
};

}  // namespace epoch::server
