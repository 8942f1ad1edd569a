// PosixFileSystem and the FileSystem helpers shared by every implementation.
#include "epoch/wal/posix_file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace epoch::wal {

std::string_view FsOpName(FsOp op) {
  switch (op) {
    case FsOp::kOpen: return "open";
    case FsOp::kRead: return "read";
    case FsOp::kWrite: return "write";
    case FsOp::kSync: return "fdatasync";
    case FsOp::kSyncDir: return "fsync(dir)";
    case FsOp::kRename: return "rename";
    case FsOp::kRemove: return "remove";
    case FsOp::kTruncate: return "truncate";
    case FsOp::kAllocate: return "fallocate";
    case FsOp::kCreateDir: return "mkdir";
    case FsOp::kList: return "list";
    case FsOp::kLock: return "lock";
  }
  return "unknown";
}

void FileSystem::SetFaultHook(std::shared_ptr<FaultHook> hook) {
  std::lock_guard lock(hook_mu_);
  hook_ = std::move(hook);
}

Status FileSystem::CheckFault(FsOp op, std::string_view path) const {
  std::shared_ptr<FaultHook> hook;
  {
    std::lock_guard lock(hook_mu_);
    hook = hook_;
  }
  if (!hook) return Status::Ok();
  return hook->BeforeOp(op, path);
}

std::string JoinPath(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  if (dir.back() == '/') return fmt::format("{}{}", dir, name);
  return fmt::format("{}/{}", dir, name);
}

Result<std::string> ReadWholeFile(File& file) {
  auto size = file.Size();
  if (!size.ok()) return size.status();
  std::string data(*size, '\0');
  std::size_t done = 0;
  while (done < data.size()) {
    auto n = file.Read(done, data.size() - done, data.data() + done);
    if (!n.ok()) return n.status();
    if (*n == 0) break;  // shrank underneath us
    done += *n;
  }
  data.resize(done);
  return data;
}

namespace {

Status ErrnoStatus(FsOp op, std::string_view path, int err) {
  return Status::IOError(fmt::format("{} {}: {}", FsOpName(op), path, std::strerror(err)));
}

class PosixFile final : public File {
 public:
  PosixFile(const FileSystem* fs, std::string path, int fd)
      : fs_(fs), path_(std::move(path)), fd_(fd) {}
  ~PosixFile() override { ::close(fd_); }
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  Result<std::size_t> Read(std::uint64_t offset, std::size_t n, char* dst) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kRead, path_));
    std::size_t done = 0;
    while (done < n) {
      const ssize_t r = ::pread(fd_, dst + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(FsOp::kRead, path_, errno);
      }
      if (r == 0) break;
      done += static_cast<std::size_t>(r);
    }
    return done;
  }

  Status Write(std::uint64_t offset, std::string_view data) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kWrite, path_));
    std::size_t done = 0;
    while (done < data.size()) {
      const ssize_t r =
          ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(FsOp::kWrite, path_, errno);
      }
      done += static_cast<std::size_t>(r);
    }
    return Status::Ok();
  }

  Status Sync() override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kSync, path_));
    // Never retried, even on EINTR: after a failed fdatasync the kernel may have dropped the
    // dirty pages and a retry can "succeed" without the data (fsyncgate). The caller fails stop.
    if (::fdatasync(fd_) != 0) return ErrnoStatus(FsOp::kSync, path_, errno);
    return Status::Ok();
  }

  Status Truncate(std::uint64_t size) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kTruncate, path_));
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
      return ErrnoStatus(FsOp::kTruncate, path_, errno);
    }
    return Status::Ok();
  }

  Status Allocate(std::uint64_t size) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kAllocate, path_));
    // posix_fallocate falls back to writing zeros where fallocate(2) is not supported.
    const int err = ::posix_fallocate(fd_, 0, static_cast<off_t>(size));
    if (err != 0) return ErrnoStatus(FsOp::kAllocate, path_, err);
    return Status::Ok();
  }

  Result<std::uint64_t> Size() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return ErrnoStatus(FsOp::kRead, path_, errno);
    return static_cast<std::uint64_t>(st.st_size);
  }

  const std::string& path() const override { return path_; }

 private:
  const FileSystem* fs_;
  const std::string path_;
  const int fd_;
};

class PosixLock final : public FileLock {
 public:
  explicit PosixLock(int fd) : fd_(fd) {}
  ~PosixLock() override {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  PosixLock(const PosixLock&) = delete;
  PosixLock& operator=(const PosixLock&) = delete;

 private:
  const int fd_;
};

}  // namespace

Result<std::unique_ptr<File>> PosixFileSystem::Open(const std::string& path, OpenMode mode) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kOpen, path));
  int flags = O_CLOEXEC;
  switch (mode) {
    case OpenMode::kRead: flags |= O_RDONLY; break;
    case OpenMode::kReadWrite: flags |= O_RDWR; break;
    case OpenMode::kCreateExclusive: flags |= O_RDWR | O_CREAT | O_EXCL; break;
  }
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("open {}: no such file", path));
    return ErrnoStatus(FsOp::kOpen, path, errno);
  }
  return std::unique_ptr<File>(std::make_unique<PosixFile>(this, path, fd));
}

Status PosixFileSystem::CreateDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kCreateDir, path));
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::IOError(fmt::format("mkdir {}: {}", path, ec.message()));
  return Status::Ok();
}

Result<std::vector<std::string>> PosixFileSystem::ListDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kList, path));
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return ErrnoStatus(FsOp::kList, path, errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

Status PosixFileSystem::Rename(const std::string& from, const std::string& to) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kRename, from));
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return ErrnoStatus(FsOp::kRename, fmt::format("{} -> {}", from, to), errno);
  }
  return Status::Ok();
}

Status PosixFileSystem::Remove(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kRemove, path));
  if (::unlink(path.c_str()) != 0) return ErrnoStatus(FsOp::kRemove, path, errno);
  return Status::Ok();
}

Status PosixFileSystem::SyncDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kSyncDir, path));
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(FsOp::kSyncDir, path, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(FsOp::kSyncDir, path, err);
  return Status::Ok();
}

bool PosixFileSystem::Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Result<std::unique_ptr<FileLock>> PosixFileSystem::Lock(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kLock, path));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(FsOp::kLock, path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return Status::Unavailable(fmt::format("{} is locked by another process", path));
    }
    return ErrnoStatus(FsOp::kLock, path, err);
  }
  return std::unique_ptr<FileLock>(std::make_unique<PosixLock>(fd));
}

}  // namespace epoch::wal
