#include "epoch/snapshot/snapshot_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace epoch::server::snapshot_io {
namespace {

std::string Errno() { return std::strerror(errno); }

}  // namespace

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Result<File> OpenForRead(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(fmt::format("open {}: {}", path, Errno()));
  return File(fd);
}

Result<File> OpenForWrite(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(fmt::format("create {}: {}", path, Errno()));
  return File(fd);
}

Status ReadAt(const File& file, const std::string& path, std::uint64_t offset, char* out,
              std::size_t n) {
  std::size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(file.fd(), out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(fmt::format("read {} at offset {}: {}", path, offset + done, Errno()));
    }
    if (r == 0) {
      return Status::IOError(fmt::format("read {}: file ends at offset {} (expected {} more bytes)",
                                         path, offset + done, n - done));
    }
    done += static_cast<std::size_t>(r);
  }
  return Status::Ok();
}

Status WriteAt(const File& file, const std::string& path, std::uint64_t offset,
               std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t w = ::pwrite(file.fd(), data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(
          fmt::format("write {} at offset {}: {}", path, offset + done, Errno()));
    }
    done += static_cast<std::size_t>(w);
  }
  return Status::Ok();
}

Status SyncFile(const File& file, const std::string& path) {
  if (::fsync(file.fd()) != 0) return Status::IOError(fmt::format("fsync {}: {}", path, Errno()));
  return Status::Ok();
}

Status SyncDir(const std::string& dir) {
  Result<File> d = [&]() -> Result<File> {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Status::IOError(fmt::format("open directory {}: {}", dir, Errno()));
    return File(fd);
  }();
  if (!d.ok()) return d.status();
  return SyncFile(*d, dir);
}

Result<std::uint64_t> FileSize(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return Status::IOError(fmt::format("stat {}: {}", path, Errno()));
  }
  return static_cast<std::uint64_t>(st.st_size);
}

Result<bool> IsMissingOrEmpty(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return true;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Status::InvalidArgument(fmt::format("{} exists and is not a directory", dir));
  }
  bool empty = std::filesystem::is_empty(dir, ec);
  if (ec) return Status::IOError(fmt::format("list {}: {}", dir, ec.message()));
  return empty;
}

Status RemoveAll(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) return Status::IOError(fmt::format("remove {}: {}", path, ec.message()));
  return Status::Ok();
}

}  // namespace epoch::server::snapshot_io
