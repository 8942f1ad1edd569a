// PosixFileSystem: the production FileSystem (pread/pwrite, fdatasync, fsync of directories,
// fallocate, flock). Every operation first consults the optional FaultHook (file_system.h), which
// is how the server's chaos failpoints make the disk slow, stalled or failing at run time.
//
// Thread-safety: as FileSystem. Errors carry the path and strerror(errno).
#pragma once

#include "epoch/wal/file_system.h"

namespace epoch::wal {

class PosixFileSystem final : public FileSystem {
 public:
  [[nodiscard]] Result<std::unique_ptr<File>> Open(const std::string& path, OpenMode mode) override;
  [[nodiscard]] Status CreateDir(const std::string& path) override;
  [[nodiscard]] Result<std::vector<std::string>> ListDir(const std::string& path) override;
  [[nodiscard]] Status Rename(const std::string& from, const std::string& to) override;
  [[nodiscard]] Status Remove(const std::string& path) override;
  [[nodiscard]] Status SyncDir(const std::string& path) override;
  [[nodiscard]] bool Exists(const std::string& path) override;
  [[nodiscard]] Result<std::unique_ptr<FileLock>> Lock(const std::string& path) override;
};

}  // namespace epoch::wal
