// SimFileSystem: in-memory files with a durable image and a list of unsynced operations.
#include "epoch/wal/sim_file_system.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace epoch::wal {

namespace {

constexpr std::uint64_t kSectorBytes = 512;

std::string ParentOf(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void WriteAt(std::string& data, std::uint64_t offset, std::string_view bytes) {
  if (data.size() < offset + bytes.size()) data.resize(offset + bytes.size(), '\0');
  std::copy(bytes.begin(), bytes.end(), data.begin() + static_cast<std::ptrdiff_t>(offset));
}

}  // namespace

struct SimFileSystem::Op {
  enum class Kind : std::uint8_t { kWrite, kTruncate, kAllocate };
  Kind kind;
  std::uint64_t offset = 0;  // kWrite
  std::string bytes;         // kWrite
  std::uint64_t size = 0;    // kTruncate, kAllocate

  void ApplyTo(std::string& data) const {
    switch (kind) {
      case Kind::kWrite: WriteAt(data, offset, bytes); break;
      case Kind::kTruncate: data.resize(size, '\0'); break;
      case Kind::kAllocate:
        if (data.size() < size) data.resize(size, '\0');
        break;
    }
  }
};

struct SimFileSystem::Inode {
  std::string data;     // what reads see
  std::string durable;  // as of the last Sync()
  std::vector<Op> unsynced;
};

class SimFileSystem::SimFile final : public File {
 public:
  SimFile(SimFileSystem* fs, std::string path, InodePtr inode, std::uint64_t epoch, bool writable)
      : fs_(fs),
        path_(std::move(path)),
        inode_(std::move(inode)),
        epoch_(epoch),
        writable_(writable) {}

  Result<std::size_t> Read(std::uint64_t offset, std::size_t n, char* dst) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kRead, path_));
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckAliveLocked());
    const std::string& data = inode_->data;
    if (offset >= data.size()) return std::size_t{0};
    const std::size_t count = std::min<std::size_t>(n, data.size() - offset);
    std::copy_n(data.data() + offset, count, dst);
    return count;
  }

  Status Write(std::uint64_t offset, std::string_view bytes) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kWrite, path_));
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckWritableLocked());
    Op op{Op::Kind::kWrite, offset, std::string(bytes), 0};
    op.ApplyTo(inode_->data);
    inode_->unsynced.push_back(std::move(op));
    fs_->stats_.writes++;
    fs_->stats_.bytes_written += bytes.size();
    return Status::Ok();
  }

  Status Sync() override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kSync, path_));
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckAliveLocked());
    inode_->durable = inode_->data;
    inode_->unsynced.clear();
    fs_->stats_.syncs++;
    return Status::Ok();
  }

  Status Truncate(std::uint64_t size) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kTruncate, path_));
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckWritableLocked());
    Op op{Op::Kind::kTruncate, 0, {}, size};
    op.ApplyTo(inode_->data);
    inode_->unsynced.push_back(std::move(op));
    return Status::Ok();
  }

  Status Allocate(std::uint64_t size) override {
    EPOCH_RETURN_IF_ERROR(fs_->CheckFault(FsOp::kAllocate, path_));
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckWritableLocked());
    Op op{Op::Kind::kAllocate, 0, {}, size};
    op.ApplyTo(inode_->data);
    inode_->unsynced.push_back(std::move(op));
    return Status::Ok();
  }

  Result<std::uint64_t> Size() override {
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckAliveLocked());
    return static_cast<std::uint64_t>(inode_->data.size());
  }

  const std::string& path() const override { return path_; }

 private:
  Status CheckAliveLocked() const {
    EPOCH_RETURN_IF_ERROR(fs_->CheckUpLocked(path_));
    if (epoch_ != fs_->crash_epoch_) {
      return Status::IOError(fmt::format("{}: stale handle from before a simulated crash", path_));
    }
    return Status::Ok();
  }
  Status CheckWritableLocked() const {
    EPOCH_RETURN_IF_ERROR(CheckAliveLocked());
    if (!writable_) return Status::IOError(fmt::format("{}: opened read-only", path_));
    return Status::Ok();
  }

  SimFileSystem* fs_;
  const std::string path_;
  const InodePtr inode_;
  const std::uint64_t epoch_;
  const bool writable_;
};

class SimFileSystem::SimLock final : public FileLock {
 public:
  SimLock(SimFileSystem* fs, std::string path, std::uint64_t epoch)
      : fs_(fs), path_(std::move(path)), epoch_(epoch) {}
  ~SimLock() override {
    std::lock_guard lock(fs_->mu_);
    if (epoch_ == fs_->crash_epoch_) fs_->locks_.erase(path_);
  }
  SimLock(const SimLock&) = delete;
  SimLock& operator=(const SimLock&) = delete;

 private:
  SimFileSystem* fs_;
  const std::string path_;
  const std::uint64_t epoch_;
};

SimFileSystem::SimFileSystem() { dirs_.insert("/"); }
SimFileSystem::~SimFileSystem() = default;

Status SimFileSystem::CheckUpLocked(std::string_view path) const {
  if (down_) return Status::IOError(fmt::format("{}: simulated crash, process is down", path));
  return Status::Ok();
}

SimFileSystem::InodePtr SimFileSystem::FindLocked(const std::string& path) const {
  const auto it = names_.find(path);
  return it == names_.end() ? nullptr : it->second;
}

Result<std::unique_ptr<File>> SimFileSystem::Open(const std::string& path, OpenMode mode) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kOpen, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  InodePtr inode = FindLocked(path);
  if (mode == OpenMode::kCreateExclusive) {
    if (inode) return Status::IOError(fmt::format("open {}: file exists", path));
    if (!dirs_.contains(ParentOf(path))) {
      return Status::NotFound(fmt::format("open {}: no such directory", path));
    }
    inode = std::make_shared<Inode>();
    names_[path] = inode;
  } else if (!inode) {
    return Status::NotFound(fmt::format("open {}: no such file", path));
  }
  return std::unique_ptr<File>(std::make_unique<SimFile>(this, path, std::move(inode), crash_epoch_,
                                                         mode != OpenMode::kRead));
}

Status SimFileSystem::CreateDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kCreateDir, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  for (std::string p = path; !p.empty() && p != "." && !dirs_.contains(p); p = ParentOf(p)) {
    dirs_.insert(p);
  }
  return Status::Ok();
}

Result<std::vector<std::string>> SimFileSystem::ListDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kList, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  if (!dirs_.contains(path)) return Status::NotFound(fmt::format("list {}: no such dir", path));
  std::vector<std::string> out;
  for (const auto& [name, inode] : names_) {
    if (ParentOf(name) == path) out.push_back(BaseName(name));
  }
  for (const auto& dir : dirs_) {
    if (dir != path && ParentOf(dir) == path) out.push_back(BaseName(dir));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status SimFileSystem::Rename(const std::string& from, const std::string& to) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kRename, from));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(from));
  const auto it = names_.find(from);
  if (it == names_.end()) return Status::NotFound(fmt::format("rename {}: no such file", from));
  InodePtr inode = it->second;
  names_.erase(it);
  names_[to] = std::move(inode);
  return Status::Ok();
}

Status SimFileSystem::Remove(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kRemove, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  if (names_.erase(path) == 0) {
    return Status::NotFound(fmt::format("remove {}: no such file", path));
  }
  return Status::Ok();
}

Status SimFileSystem::SyncDir(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kSyncDir, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  if (!dirs_.contains(path)) return Status::NotFound(fmt::format("fsync {}: no such dir", path));
  std::erase_if(durable_names_, [&](const auto& kv) { return ParentOf(kv.first) == path; });
  for (const auto& [name, inode] : names_) {
    if (ParentOf(name) == path) durable_names_[name] = inode;
  }
  stats_.dir_syncs++;
  return Status::Ok();
}

bool SimFileSystem::Exists(const std::string& path) {
  std::lock_guard lock(mu_);
  return names_.contains(path) || dirs_.contains(path);
}

Result<std::unique_ptr<FileLock>> SimFileSystem::Lock(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kLock, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  if (!locks_.insert(path).second) {
    return Status::Unavailable(fmt::format("{} is locked by another process", path));
  }
  return std::unique_ptr<FileLock>(std::make_unique<SimLock>(this, path, crash_epoch_));
}

void SimFileSystem::Crash() { Crash({}); }

void SimFileSystem::Crash(const std::map<std::string, FileCrashPlan>& plans) {
  std::lock_guard lock(mu_);
  CrashLocked(plans, 0);
}

void SimFileSystem::CrashRandom(std::uint64_t seed) {
  std::lock_guard lock(mu_);
  std::mt19937_64 rng(seed);
  std::map<std::string, FileCrashPlan> plans;
  std::set<Inode*> planned;
  for (const auto* names : {&names_, &durable_names_}) {
    for (const auto& [path, inode] : *names) {
      if (!planned.insert(inode.get()).second || inode->unsynced.empty()) continue;
      FileCrashPlan plan;
      const std::size_t n = inode->unsynced.size();
      plan.full_ops = rng() % (n + 1);
      if (plan.full_ops < n && (rng() & 1) != 0) {
        const Op& op = inode->unsynced[plan.full_ops];
        if (op.kind == Op::Kind::kWrite && !op.bytes.empty()) {
          plan.torn_bytes = rng() % op.bytes.size();
          plan.fill = (rng() & 1) != 0 ? TearFill::kGarbage : TearFill::kOld;
        }
      }
      plans[path] = plan;
    }
  }
  CrashLocked(plans, rng());
}

void SimFileSystem::CrashLocked(const std::map<std::string, FileCrashPlan>& plans,
                                std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::set<Inode*> done;
  auto apply = [&](const std::string& path, const InodePtr& inode) {
    if (!done.insert(inode.get()).second) return;
    std::string image = inode->durable;
    const auto it = plans.find(path);
    if (it != plans.end()) {
      const FileCrashPlan& plan = it->second;
      const std::size_t full = std::min(plan.full_ops, inode->unsynced.size());
      for (std::size_t i = 0; i < full; ++i) inode->unsynced[i].ApplyTo(image);
      if (plan.torn_bytes && full < inode->unsynced.size() &&
          inode->unsynced[full].kind == Op::Kind::kWrite) {
        const Op& op = inode->unsynced[full];
        const std::size_t keep = std::min(*plan.torn_bytes, op.bytes.size());
        WriteAt(image, op.offset, std::string_view(op.bytes).substr(0, keep));
        if (plan.fill == TearFill::kGarbage && keep < op.bytes.size()) {
          const std::uint64_t start = op.offset + keep;
          const std::uint64_t sector_end = (start / kSectorBytes + 1) * kSectorBytes;
          const std::uint64_t end = std::min(sector_end, op.offset + op.bytes.size());
          std::string garbage(end - start, '\0');
          for (char& c : garbage) c = static_cast<char>(rng() & 0xff);
          WriteAt(image, start, garbage);
        }
      }
    }
    inode->data = image;
    inode->durable = std::move(image);
    inode->unsynced.clear();
  };
  // Plans are keyed by the names the test sees before the crash.
  for (const auto& [path, inode] : names_) apply(path, inode);
  for (const auto& [path, inode] : durable_names_) apply(path, inode);
  names_ = durable_names_;
  locks_.clear();
  ++crash_epoch_;
  down_ = true;
}

void SimFileSystem::Restart() {
  std::lock_guard lock(mu_);
  down_ = false;
}

std::size_t SimFileSystem::UnsyncedOps(const std::string& path) const {
  std::lock_guard lock(mu_);
  const InodePtr inode = FindLocked(path);
  return inode ? inode->unsynced.size() : 0;
}

std::optional<SimFileSystem::PendingWrite> SimFileSystem::UnsyncedWrite(const std::string& path,
                                                                        std::size_t i) const {
  std::lock_guard lock(mu_);
  const InodePtr inode = FindLocked(path);
  if (!inode || i >= inode->unsynced.size() || inode->unsynced[i].kind != Op::Kind::kWrite) {
    return std::nullopt;
  }
  return PendingWrite{inode->unsynced[i].offset, inode->unsynced[i].bytes};
}

std::optional<std::string> SimFileSystem::Contents(const std::string& path) const {
  std::lock_guard lock(mu_);
  const InodePtr inode = FindLocked(path);
  if (!inode) return std::nullopt;
  return inode->data;
}

std::optional<std::string> SimFileSystem::DurableContents(const std::string& path) const {
  std::lock_guard lock(mu_);
  const auto it = durable_names_.find(path);
  if (it == durable_names_.end()) return std::nullopt;
  return it->second->durable;
}

void SimFileSystem::CorruptDurable(const std::string& path, std::uint64_t offset,
                                   std::string_view bytes) {
  std::lock_guard lock(mu_);
  InodePtr inode = FindLocked(path);
  if (!inode) {
    const auto it = durable_names_.find(path);
    if (it != durable_names_.end()) inode = it->second;
  }
  if (!inode) std::abort();  // test bug: corrupting a file that does not exist
  WriteAt(inode->durable, offset, bytes);
  WriteAt(inode->data, offset, bytes);
}

SimFileSystemStats SimFileSystem::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace epoch::wal
