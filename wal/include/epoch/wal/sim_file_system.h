// SimFileSystem: an in-memory FileSystem that models what a power loss does to files, for the
// WAL's unit tests and the cluster simulator (the in-memory twin of PosixFileSystem).
//
// Model (wal/README.md "Power loss"; wal/FORMAT.md §6):
//   - Each file has the bytes that reads see and, separately, its durable bytes as of the last
//     successful Sync() (fdatasync). Writes and allocations after that are kept as an ordered
//     list of unsynced operations.
//   - Names (create, rename, remove) are kept as an ordered list of unsynced directory
//     operations until SyncDir() of their directory makes them durable (with any earlier
//     operation on the same names that they depend on). Directories themselves are durable.
//   - Crash() is the pessimistic power loss: every file reverts to its durable bytes and every
//     directory to its durable names. Crash(plans) lets an explicit in-order prefix of a file's
//     unsynced writes land, the last one torn at a chosen byte.
//   - CrashRandom(seed) is the realistic power loss, drawn from the seed (CrashModel):
//       * file data: every page (4 KiB) dirtied since the last Sync survives or is lost on its
//         own, in any combination (a later write's page present, an earlier write's page lost);
//         a surviving page has the content of its latest write or of an earlier one (it was
//         written back in between); a page may be torn: each 512-byte sector lands or not, and
//         one sector is cut at any byte, the rest of it old or garbage. Only bytes that an
//         unsynced write changed can change ("powersafe overwrite": a torn sector never damages
//         bytes it was not asked to write, as FORMAT.md §6 assumes);
//       * file size: the size after some prefix of the unsynced operations (metadata is
//         journalled in order); data past that size is cut, a lost page inside it reads old
//         bytes (zeros past the old size: data=ordered never exposes stale blocks);
//       * names: unsynced directory operations survive as an in-order prefix (kPrefix: ext4,
//         xfs — one metadata journal) or as any subset that respects dependencies (kAnySubset:
//         all POSIX promises; btrfs's log tree can do this), each operation atomic.
//     The durable parts (synced data, synced names) always survive.
//   - A failed Sync (the fault hook returned an error) models Linux after a writeback error
//     ("fsyncgate"): the dirty pages are marked clean, a random part of them (drawn from the
//     file system's seed) reached the disk, and a later Sync that succeeds does NOT write the
//     rest. A failed SyncDir likewise settles its pending directory operations for good.
//   - After a crash the file system is "down": every operation fails with IOError until
//     Restart(). A test lets the dead process's objects (a WAL whose threads may be blocked in a
//     stalled operation) finish and be destroyed in between, so nothing they do reaches the
//     post-crash image. File handles and locks from before the crash stay dead after Restart().
//   - Faults: the FaultHook from file_system.h (EIO, stalls) is consulted before every operation;
//     FaultInjector (fault_injector.h) is the usual hook.
//
// Thread-safety: all methods are safe to call concurrently; the fault hook runs outside the
// internal lock so a stalled operation does not block the others.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "epoch/wal/file_system.h"

namespace epoch::wal {

// How the torn part of a write looks after a crash.
enum class TearFill : std::uint8_t {
  kOld,      // bytes after the tear keep their previous content (zeros in a preallocated file)
  kGarbage,  // bytes after the tear, to the end of their 512-byte sector, are random
};

// Explicit crash plan for one file: how many of its unsynced operations land in full, and how
// many bytes of the next one (if it is a write) land torn.
struct FileCrashPlan {
  std::size_t full_ops = 0;
  std::optional<std::size_t> torn_bytes;  // bytes of operation `full_ops` that land
  TearFill fill = TearFill::kOld;
};

// How unsynced directory operations fare in CrashRandom().
enum class DirOpOrder : std::uint8_t {
  kPrefix,     // an in-order prefix survives (ext4/xfs: one metadata journal, replayed in order)
  kAnySubset,  // any subset in which each survivor's inputs survived too (POSIX; btrfs)
  kRandom,     // either, chosen per crash from the seed
};

// The granularity of CrashRandom()'s power loss.
struct CrashModel {
  std::uint64_t page_bytes = 4096;   // writeback unit: each dirty page survives or not on its own
  std::uint64_t sector_bytes = 512;  // a torn page lands whole sectors, and one cut at a byte
  DirOpOrder dir_order = DirOpOrder::kRandom;
};

// What one CrashRandom() (or failed Sync) did: for diagnostics and per-fault counts.
struct CrashStats {
  std::uint64_t files = 0;        // files that had unsynced data
  std::uint64_t pages_kept = 0;   // dirty pages that survived whole, with their latest content
  std::uint64_t pages_older = 0;  // survived with an earlier write's content
  std::uint64_t pages_torn = 0;   // survived in part (sectors, one cut at a byte)
  std::uint64_t pages_lost = 0;   // kept their durable content
  // Files where a page written later (by a later write, or further on in the same write)
  // survived while an earlier one was lost: not a prefix.
  std::uint64_t files_reordered = 0;
  std::uint64_t sizes_cut = 0;  // files whose size reverted to an earlier one
  std::uint64_t dir_ops_kept = 0;
  std::uint64_t dir_ops_lost = 0;
  CrashStats& operator+=(const CrashStats& o);
};

struct SimFileSystemStats {
  std::uint64_t writes = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t syncs = 0;
  std::uint64_t dir_syncs = 0;
};

class SimFileSystem final : public FileSystem {
 public:
  // `seed` drives what a failed Sync leaves on disk (CrashRandom takes its own seed).
  explicit SimFileSystem(std::uint64_t seed = 0, CrashModel model = {});
  ~SimFileSystem() override;
  SimFileSystem(const SimFileSystem&) = delete;
  SimFileSystem& operator=(const SimFileSystem&) = delete;

  [[nodiscard]] Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override;
  [[nodiscard]] Status CreateDir(const std::string& path) override;
  [[nodiscard]] Result<std::vector<std::string>> ListDir(const std::string& path) override;
  [[nodiscard]] Status Rename(const std::string& from, const std::string& to) override;
  [[nodiscard]] Status Remove(const std::string& path) override;
  [[nodiscard]] Status SyncDir(const std::string& path) override;
  [[nodiscard]] bool Exists(const std::string& path) override;
  [[nodiscard]] Result<std::unique_ptr<FileLock>> Lock(const std::string& path) override;

  // --- Crash model -------------------------------------------------------------------------
  // Drops every unsynced operation and every name change not made durable by SyncDir. Releases
  // all locks (the process died) and goes down until Restart().
  void Crash();
  // As Crash(), but first lets the planned part of the unsynced operations of the named files
  // land (paths not in the map lose everything unsynced).
  void Crash(const std::map<std::string, FileCrashPlan>& plans);
  // The realistic power loss (file comment), every choice drawn from `seed`: the same seed and
  // the same unsynced state give the same image.
  CrashStats CrashRandom(std::uint64_t seed);
  // Ends the down state after a crash: the "restarted process" may use the file system again.
  void Restart();

  // Number of unsynced operations of the file at `path` (0 if it does not exist).
  [[nodiscard]] std::size_t UnsyncedOps(const std::string& path) const;
  // Unsynced operation `i` of `path` if it is a write: its offset and bytes (what a torn plan
  // can cut).
  struct PendingWrite {
    std::uint64_t offset = 0;
    std::string bytes;
  };
  [[nodiscard]] std::optional<PendingWrite> UnsyncedWrite(const std::string& path,
                                                          std::size_t i) const;

  // --- Direct access for tests (bypass the fault hook) ------------------------------------
  [[nodiscard]] std::optional<std::string> Contents(const std::string& path) const;
  [[nodiscard]] std::optional<std::string> DurableContents(const std::string& path) const;
  // Overwrites bytes of a file as durable data (bit flips, planted garbage). The file must exist.
  void CorruptDurable(const std::string& path, std::uint64_t offset, std::string_view bytes);
  [[nodiscard]] SimFileSystemStats stats() const;
  // Totals over every CrashRandom() and failed Sync so far.
  [[nodiscard]] CrashStats crash_stats() const;

 private:
  struct Inode;
  class SimFile;
  class SimLock;
  struct Op;
  struct DirOp;

  using InodePtr = std::shared_ptr<Inode>;
  using Rng = std::mt19937_64;

  void CrashLocked(const std::map<std::string, FileCrashPlan>& plans, std::uint64_t seed);
  // The page-level image of a file after power loss or a writeback error (file comment).
  [[nodiscard]] std::string PowerLossImage(const Inode& inode, Rng& rng, CrashStats& stats) const;
  // A Sync that failed: settles the file's dirty pages for good (fsyncgate).
  void FailSyncLocked(Inode& inode);
  void FailSyncDirLocked(const std::string& dir);
  // Marks the unsynced directory operations that SyncDir(dir) makes durable.
  [[nodiscard]] std::vector<bool> SyncedByLocked(const std::string& dir) const;
  // Applies `op` to a name table if its inputs are there; false if not.
  static bool ApplyDirOp(const DirOp& op, std::map<std::string, InodePtr>& names);
  void RecordDirOpLocked(DirOp op);
  void ResetCrashedLocked();
  [[nodiscard]] InodePtr FindLocked(const std::string& path) const;
  [[nodiscard]] Status CheckUpLocked(std::string_view path) const;

  mutable std::mutex mu_;
  std::map<std::string, InodePtr> names_;          // what ListDir/Open see
  std::map<std::string, InodePtr> durable_names_;  // names every crash keeps
  std::vector<DirOp> dir_ops_;  // names_ = durable_names_ + these, in order (not yet synced)
  std::set<std::string> dirs_;
  std::set<std::string> locks_;    // paths currently locked
  std::uint64_t crash_epoch_ = 0;  // bumped by Crash(): handles and locks from before are dead
  bool down_ = false;              // between Crash() and Restart()
  SimFileSystemStats stats_;
  const CrashModel model_;
  Rng fault_rng_;           // what a failed Sync leaves on disk
  CrashStats crash_stats_;  // totals
};

}  // namespace epoch::wal
