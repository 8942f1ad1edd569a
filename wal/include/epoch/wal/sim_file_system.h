// SimFileSystem: an in-memory FileSystem that models what a crash does to files, for the WAL's
// unit tests and the cluster simulator (the in-memory twin of PosixFileSystem).
//
// Model (wal/FORMAT.md §6):
//   - Each file has the bytes that reads see and, separately, its durable bytes as of the last
//     Sync(). Writes, truncations and allocations after that are kept as an ordered list of
//     unsynced operations.
//   - Names (create, rename, remove) become durable only when the parent directory is synced.
//     Directories themselves are always durable.
//   - Crash() reverts every file to its durable bytes and every directory to its durable names,
//     optionally letting a prefix of each file's unsynced operations land, the last of which may
//     be torn at any byte and followed by zeros or garbage.
//   - After Crash() the file system is "down": every operation fails with IOError until
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

struct SimFileSystemStats {
  std::uint64_t writes = 0;
  std::uint64_t bytes_written = 0;
  std::uint64_t syncs = 0;
  std::uint64_t dir_syncs = 0;
};

class SimFileSystem final : public FileSystem {
 public:
  SimFileSystem();
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
  // As Crash(), with a random plan for every file drawn from `seed`: a random prefix of its
  // unsynced operations lands, the last one torn at a random byte half of the time.
  void CrashRandom(std::uint64_t seed);
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

 private:
  struct Inode;
  class SimFile;
  class SimLock;
  struct Op;

  using InodePtr = std::shared_ptr<Inode>;

  void CrashLocked(const std::map<std::string, FileCrashPlan>& plans, std::uint64_t seed);
  [[nodiscard]] InodePtr FindLocked(const std::string& path) const;
  [[nodiscard]] Status CheckUpLocked(std::string_view path) const;

  mutable std::mutex mu_;
  std::map<std::string, InodePtr> names_;          // what ListDir/Open see
  std::map<std::string, InodePtr> durable_names_;  // names as of the last SyncDir of the parent
  std::set<std::string> dirs_;
  std::set<std::string> locks_;    // paths currently locked
  std::uint64_t crash_epoch_ = 0;  // bumped by Crash(): handles and locks from before are dead
  bool down_ = false;              // between Crash() and Restart()
  SimFileSystemStats stats_;
};

}  // namespace epoch::wal
