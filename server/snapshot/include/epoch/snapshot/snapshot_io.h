// Small helpers shared by the snapshot files: whole-file POSIX I/O with clear error messages and
// directory housekeeping.
//
// Who calls it: the snapshot layer's archive, transfer, checkpoints and manager, and the
// daemon's snapshot_restore.cc. Threading: pure functions and per-object state.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::server::snapshot_io {

// An open file descriptor, closed on destruction.
class File {
 public:
  File() = default;
  explicit File(int fd) : fd_(fd) {}
  ~File();
  File(File&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool is_open() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

[[nodiscard]] Result<File> OpenForRead(const std::string& path);
// Creates (or opens) for writing without truncating.
[[nodiscard]] Result<File> OpenForWrite(const std::string& path);
// Reads exactly n bytes at offset; an early end of file is an error naming the file.
[[nodiscard]] Status ReadAt(const File& file, const std::string& path, std::uint64_t offset,
                            char* out, std::size_t n);
[[nodiscard]] Status WriteAt(const File& file, const std::string& path, std::uint64_t offset,
                             std::string_view data);
[[nodiscard]] Status SyncFile(const File& file, const std::string& path);
[[nodiscard]] Status SyncDir(const std::string& dir);
[[nodiscard]] Result<std::uint64_t> FileSize(const std::string& path);

// True when `dir` does not exist or is an empty directory.
[[nodiscard]] Result<bool> IsMissingOrEmpty(const std::string& dir);
// Best-effort recursive removal (logs nothing; returns the error text for the caller).
Status RemoveAll(const std::string& path);

}  // namespace epoch::server::snapshot_io
