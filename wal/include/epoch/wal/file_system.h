// FileSystem: every OS file operation the WAL makes, behind an interface (in the style of
// LevelDB's Env), so that tests can lose unsynced data, tear writes, fail with EIO and stall.
// Implementations: PosixFileSystem (production) and SimFileSystem (tests, simulation).
//
// Both implementations consult an optional FaultHook before each operation. The hook may fail the
// operation (it is then not performed), delay it, or block it until released: the server's chaos
// failpoints install one on the POSIX file system at run time (a slow or stalled disk), the unit
// tests install one on the simulated file system.
//
// Thread-safety: a FileSystem and the File objects it returns may be used from several threads at
// once; Read and Write on one File at different offsets may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"

namespace epoch::wal {

// The operations a FaultHook can see.
enum class FsOp : std::uint8_t {
  kOpen,
  kRead,
  kWrite,
  kSync,     // fdatasync of a file
  kSyncDir,  // fsync of a directory (makes creates, renames and removes in it durable)
  kRename,
  kRemove,
  kTruncate,
  kAllocate,
  kCreateDir,
  kList,
  kLock,
};

[[nodiscard]] std::string_view FsOpName(FsOp op);

// Consulted before each file-system operation, on the thread performing it. Returning non-OK
// fails the operation without performing it. May block or sleep (stall, slow disk).
class FaultHook {
 public:
  virtual ~FaultHook() = default;
  [[nodiscard]] virtual Status BeforeOp(FsOp op, std::string_view path) = 0;
};

// An open file. Offsets are absolute (pread/pwrite style); there is no file position.
class File {
 public:
  virtual ~File() = default;

  // Reads up to n bytes at offset into dst; returns the count, which is short only at end of file.
  [[nodiscard]] virtual Result<std::size_t> Read(std::uint64_t offset, std::size_t n,
                                                 char* dst) = 0;
  // Writes all of data at offset (extending the file if needed). Not durable until Sync().
  [[nodiscard]] virtual Status Write(std::uint64_t offset, std::string_view data) = 0;
  // fdatasync: makes the file's data (and the size needed to read it) durable.
  [[nodiscard]] virtual Status Sync() = 0;
  [[nodiscard]] virtual Status Truncate(std::uint64_t size) = 0;
  // Ensures the file is at least `size` bytes, the new bytes reading as zero (fallocate).
  [[nodiscard]] virtual Status Allocate(std::uint64_t size) = 0;
  [[nodiscard]] virtual Result<std::uint64_t> Size() = 0;
  [[nodiscard]] virtual const std::string& path() const = 0;
};

// Held while a directory is in use by one process (flock on POSIX). Released on destruction.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

enum class OpenMode : std::uint8_t {
  kRead,            // existing file, read-only
  kReadWrite,       // existing file
  kCreateExclusive  // new file (fails if it exists), read-write
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  [[nodiscard]] virtual Result<std::unique_ptr<File>> Open(const std::string& path,
                                                           OpenMode mode) = 0;
  // Creates the directory (and parents); OK if it exists.
  [[nodiscard]] virtual Status CreateDir(const std::string& path) = 0;
  // File names (not paths) in the directory, sorted, without "." and "..".
  [[nodiscard]] virtual Result<std::vector<std::string>> ListDir(const std::string& path) = 0;
  [[nodiscard]] virtual Status Rename(const std::string& from, const std::string& to) = 0;
  [[nodiscard]] virtual Status Remove(const std::string& path) = 0;
  [[nodiscard]] virtual Status SyncDir(const std::string& path) = 0;
  [[nodiscard]] virtual bool Exists(const std::string& path) = 0;
  // Exclusive lock on `path` (created if absent); fails if another holder has it.
  [[nodiscard]] virtual Result<std::unique_ptr<FileLock>> Lock(const std::string& path) = 0;

  // Installs (or, with nullptr, removes) the fault hook. Safe while operations are running.
  void SetFaultHook(std::shared_ptr<FaultHook> hook);

  // Implementations (and their File objects) call this first in every operation.
  [[nodiscard]] Status CheckFault(FsOp op, std::string_view path) const;

 private:
  mutable std::mutex hook_mu_;
  std::shared_ptr<FaultHook> hook_;  // guarded by hook_mu_ (copied out before calling it)
};

// "dir/name", without doubling the slash.
[[nodiscard]] std::string JoinPath(std::string_view dir, std::string_view name);

// Reads the whole file (for recovery and the epoch-wal tool).
[[nodiscard]] Result<std::string> ReadWholeFile(File& file);

}  // namespace epoch::wal
