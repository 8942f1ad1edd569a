// Wal: the Raft write-ahead log. Segmented, checksummed, group-committed, crash-safe
// (format: wal/FORMAT.md; contract and threading: wal/README.md).
//
// Who calls it: the server's Raft driver persists each Ready through it (entries, hard state,
// snapshot metadata) and hands it to the Raft core as the core's raft::LogReader. The benchmark
// appends from many threads.
//
// Durability model: Append / SaveHardState / SaveSnapshot / InstallSnapshot validate, update the
// in-memory log at once (so LastIndex(), TermAt() and Entries() see the new state immediately) and
// queue the records; they never block on the disk. A background sync thread writes everything
// queued as one frame with one pwrite and one fdatasync (group commit) and only then hands the
// requests' DurableCallbacks to be called, in submission order. So the driver keeps stepping the
// Raft core while a sync is in flight, and sends what depends on durability (votes, append acks,
// its own match index) from the callback.
//
// Fail-stop: if a write, fdatasync, rename or directory sync fails, the WAL enters a failed state
// for good (an fsync is never retried: after a failed fdatasync the kernel may have dropped the
// dirty pages). Every pending callback and every later request's callback gets that error; the
// server is expected to exit. Health() reports it.
//
// Threading contract:
//   - Append, SaveHardState, SaveSnapshot, Sync and every read may be called from any thread;
//     they are serialised by one internal mutex, held only for in-memory work (never across I/O).
//     Requests are ordered by the order in which their calls take that mutex.
//   - Reads (the LogReader methods) reflect every request accepted so far, durable or not. Reads
//     of entries no longer cached in memory read the segment file outside the mutex.
//   - DurableCallbacks run on the WAL's completion thread (or on the sync thread with
//     Options::inline_callbacks) (fed by the sync thread once a batch's
//     fdatasync has returned), one at a time, in submission order, while the sync thread already
//     writes the next batch. They must be short (post to the caller's own executor); they may call
//     any Wal method except Close() and the destructor.
//   - Close() (or the destructor) must not run concurrently with other calls.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "epoch/raft/log_reader.h"
#include "epoch/raft/types.h"
#include "epoch/status.h"
#include "epoch/wal/file_system.h"
#include "epoch/wal/format.h"

namespace epoch::wal {

class LogModel;

enum class PreallocMode : std::uint8_t {
  kZeroFill,   // write zeros: later fdatasyncs flush data only (default)
  kFallocate,  // fallocate(2): fast to create, but each sync may also commit extent metadata
};

enum class LogLevel : std::uint8_t { kError, kWarning, kNotice };

// Reported after every group-commit fdatasync (for the server's fsync latency histogram).
struct SyncEvent {
  std::chrono::nanoseconds write_duration{0};
  std::chrono::nanoseconds sync_duration{0};
  std::uint64_t frame_bytes = 0;
  std::uint32_t records = 0;
  std::uint32_t requests = 0;
};

struct Options {
  std::uint64_t segment_bytes = 64u << 20;
  PreallocMode prealloc_mode = PreallocMode::kZeroFill;
  // Entry data kept in memory (the newest entries); older entries are read back from disk.
  std::uint64_t cache_bytes_max = 64u << 20;
  std::uint64_t entry_bytes_max = 64u << 20;
  // Warnings (torn tail truncated) and errors (fail-stop). Default: stderr.
  std::function<void(LogLevel, std::string_view)> log;
  // Called on the sync thread after each fdatasync, before the callbacks.
  std::function<void(const SyncEvent&)> on_sync;
  // Run DurableCallbacks on the sync thread itself, right after the fdatasync, instead of on the
  // completion thread. For a caller that submits few requests per sync and whose callbacks only
  // post to its own executor (the Raft driver: one request per Ready), the completion thread is
  // one more thread wake per sync for nothing.
  bool inline_callbacks = false;
  // No background threads: nothing is written until the owner calls SyncPending(), which does on
  // the calling thread what the sync thread does for one batch (callbacks inline); the next
  // segment is created when it is needed. For the whole-node simulator (tests/nodesim), which
  // decides when a write reaches the disk and must replay from its seed.
  bool manual_sync = false;
};

struct WalStats {
  std::uint64_t frames = 0;  // == fdatasyncs of segment data
  std::uint64_t frame_bytes = 0;
  std::uint64_t records = 0;
  std::uint64_t requests = 0;  // durable callbacks completed OK
  std::uint64_t max_frame_requests = 0;
  std::uint64_t rollovers = 0;
  std::uint64_t prealloc_waits = 0;  // rollovers that had to wait for the preallocator
  std::uint64_t segments_removed = 0;
  std::uint64_t disk_reads = 0;  // entries read back from segment files
  std::uint64_t pending_bytes = 0;
};

// What Open found and did.
struct RecoveryInfo {
  std::uint64_t segments = 0;
  std::uint64_t torn_bytes_dropped = 0;  // 0 unless a torn tail was truncated
  std::vector<std::string> warnings;
};

using DurableCallback = std::function<void(const Status&)>;

class Wal final : public raft::LogReader {
 public:
  // Opens (creating if needed) the WAL in `dir`: recovers, truncates a torn tail with a warning,
  // and refuses with Corruption naming file and offset on damage before the tail. `fs` must
  // outlive the Wal.
  [[nodiscard]] static Result<std::unique_ptr<Wal>> Open(FileSystem& fs, std::string dir,
                                                         Options options = {});
  ~Wal() override;
  Wal(const Wal&) = delete;
  Wal& operator=(const Wal&) = delete;

  // Appends `entries` (contiguous indexes; may be empty) and then, if given, the hard state.
  // If entries[0].index <= LastIndex(), the conflicting suffix [entries[0].index, LastIndex()] is
  // truncated first (Raft §5.3), recorded in the same frame as the new entries so that both or
  // neither survive a crash. Returns InvalidArgument (and calls nothing) for a request that would
  // leave a gap, overwrite the snapshot, or exceed entry_bytes_max; otherwise OK, and `done` is
  // called exactly once, after the request is durable or with the error that made the WAL fail.
  [[nodiscard]] Status Append(std::vector<raft::Entry> entries,
                              std::optional<raft::HardState> hard_state, DurableCallback done);
  [[nodiscard]] Status SaveHardState(const raft::HardState& hard_state, DurableCallback done);
  // Records a snapshot taken locally (log compaction): FirstIndex() becomes meta.index + 1. The
  // log after meta.index is kept if it has an entry at meta.index with meta.term, otherwise
  // discarded (Raft §7). Once durable, whole segments holding only entries <= meta.index are
  // deleted. InvalidArgument if meta is older than the current snapshot.
  [[nodiscard]] Status SaveSnapshot(const raft::SnapshotMeta& meta, DurableCallback done);
  // Records a snapshot received from the leader (Ready::snapshot), whose data the driver has
  // already installed: the whole log is discarded, whatever it holds, and the next entry is
  // meta.index + 1 (as raft::MemoryLog::ApplySnapshot and etcd's MemoryStorage do).
  [[nodiscard]] Status InstallSnapshot(const raft::SnapshotMeta& meta, DurableCallback done);
  // `done` runs once everything requested before it is durable.
  void Sync(DurableCallback done);

  // Options::manual_sync only: writes everything requested so far as one frame, fdatasyncs it
  // and runs its callbacks, on the calling thread. False when nothing was requested.
  bool SyncPending();
  [[nodiscard]] bool HasPending() const;

  // Writes what is queued, stops the background threads, releases the directory lock. Returns
  // the fail-stop error if the WAL failed. Idempotent.
  Status Close();

  // OK, or the error that made the WAL fail (permanent).
  [[nodiscard]] Status Health() const;
  [[nodiscard]] WalStats stats() const;
  [[nodiscard]] const RecoveryInfo& recovery() const { return recovery_; }

  // raft::LogReader (see log_reader.h for the contract). InitialHardState() returns the latest
  // hard state requested (which, before any request, is the one recovered).
  [[nodiscard]] raft::HardState InitialHardState() const override;
  [[nodiscard]] raft::SnapshotMeta LastSnapshot() const override;
  [[nodiscard]] LogIndex FirstIndex() const override;
  [[nodiscard]] LogIndex LastIndex() const override;
  [[nodiscard]] std::optional<Term> TermAt(LogIndex index) const override;
  // Aborts the process if an entry cannot be read back (log_reader.h: reads are fail-stop).
  [[nodiscard]] std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi,
                                                 std::uint64_t max_bytes) const override;
  // As Entries(), but returns the error (bad range, unreadable or corrupt entry on disk).
  [[nodiscard]] Result<std::vector<raft::Entry>> TryEntries(LogIndex lo, LogIndex hi,
                                                            std::uint64_t max_bytes) const;

 private:
  struct Placement;
  struct Pending;
  struct Segment;
  struct Prealloc;
  struct Completion;

  Wal(FileSystem& fs, std::string dir, Options options);
  [[nodiscard]] Status Recover();
  [[nodiscard]] Status SubmitSnapshot(const raft::SnapshotMeta& meta, bool force_discard,
                                      DurableCallback done);
  // `prefix` (a truncate record, or empty) and `records` are appended to the pending payload.
  [[nodiscard]] Status Submit(std::string_view prefix, std::string_view records,
                              std::uint32_t record_count, std::vector<Placement> placements,
                              DurableCallback done, std::optional<LogIndex> snapshot_index);
  void Log(LogLevel level, std::string_view message) const;

  // Sync thread (wal_sync.cc), or the owner's thread with Options::manual_sync.
  void SyncLoop();
  // Writes one taken batch (`status`: the WAL's health when it was taken) and completes it.
  void WriteBatch(std::unique_ptr<Pending> batch, Status status);
  [[nodiscard]] Status WriteFrame(Pending& batch);
  [[nodiscard]] Status Rollover();
  void PlaceEntries(const Pending& batch, std::uint64_t payload_base, std::uint64_t frame_bytes);
  void CompactSegments(LogIndex snapshot_index);
  void FailStop(const Status& error);
  void Complete(std::vector<DurableCallback> callbacks, const Status& status);
  std::unique_ptr<Pending> RecycledPending();

  // Completion thread (wal_sync.cc).
  void CompletionLoop();

  // Preallocator thread (wal_sync.cc).
  void PreallocLoop();
  void RequestPrealloc(std::uint64_t seq);
  [[nodiscard]] Result<std::unique_ptr<File>> TakePrealloc(std::uint64_t seq);
  [[nodiscard]] Result<std::unique_ptr<File>> CreateSegmentFile(std::uint64_t seq);
  [[nodiscard]] Status InstallSegment(std::uint64_t seq);

  FileSystem& fs_;
  const std::string dir_;
  const Options options_;
  std::unique_ptr<FileLock> lock_;
  RecoveryInfo recovery_;

  // --- Guarded by mu_ ------------------------------------------------------------------------
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the sync thread waits for work here
  // The log as requested (durable or not). Every change to it is matched by records queued in
  // pending_ in the same critical section, so replaying the disk gives back exactly this.
  std::unique_ptr<LogModel> model_;
  std::unique_ptr<Pending> pending_;
  // Segments that exist (sealed and current), by sequence number; readers pin files through
  // the shared_ptr, so compaction can delete a segment a reader is still using.
  std::map<std::uint64_t, std::shared_ptr<Segment>> segments_;
  Status failed_;  // once non-OK, never OK again (fail-stop)
  bool closing_ = false;
  bool closed_ = false;
  std::uint64_t next_op_seq_ = 1;
  mutable WalStats stats_;

  // --- Sync thread only ----------------------------------------------------------------------
  // The log as of the end of the last frame written: the next segment's checkpoint.
  format::Checkpoint written_state_;
  std::uint64_t current_seq_ = 0;
  std::uint64_t current_offset_ = 0;  // where the next frame goes
  bool current_has_frames_ = false;   // false: the next frame starts with a checkpoint
  std::shared_ptr<File> current_file_;
  std::unique_ptr<Pending> spare_;  // a taken batch, emptied, reused as the next pending_

  // --- Preallocator --------------------------------------------------------------------------
  std::unique_ptr<Prealloc> prealloc_;

  // --- Completion ----------------------------------------------------------------------------
  std::unique_ptr<Completion> completion_;

  std::thread sync_thread_;
  std::thread completion_thread_;
  std::thread prealloc_thread_;
};

}  // namespace epoch::wal
