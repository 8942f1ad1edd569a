// SimFileSystem: in-memory files with a durable image and a list of unsynced operations, and the
// power-loss model that turns them into a post-crash image (sim_file_system.h).
#include "epoch/wal/sim_file_system.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

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
  std::string durable;  // what a crash keeps for sure
  std::vector<Op> unsynced;
  // Pages a failed Sync settled (marked clean) whose durable content differs from `data`: a
  // later successful Sync does not write them unless they are written again (fsyncgate).
  std::set<std::uint64_t> diverged;
};

struct SimFileSystem::DirOp {
  enum class Kind : std::uint8_t { kCreate, kRename, kRemove };
  Kind kind;
  std::string path;  // the name created, renamed or removed
  std::string to;    // kRename: the new name
  InodePtr inode;    // the file the operation is about: it survives only with its inputs
};

CrashStats& CrashStats::operator+=(const CrashStats& o) {
  files += o.files;
  pages_kept += o.pages_kept;
  pages_older += o.pages_older;
  pages_torn += o.pages_torn;
  pages_lost += o.pages_lost;
  files_reordered += o.files_reordered;
  sizes_cut += o.sizes_cut;
  dir_ops_kept += o.dir_ops_kept;
  dir_ops_lost += o.dir_ops_lost;
  return *this;
}

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
    const Status fault = fs_->CheckFault(FsOp::kSync, path_);
    std::lock_guard lock(fs_->mu_);
    EPOCH_RETURN_IF_ERROR(CheckAliveLocked());
    if (!fault.ok()) {
      // The fdatasync was attempted and writeback failed: see FailSyncLocked.
      fs_->FailSyncLocked(*inode_);
      return fault;
    }
    Inode& inode = *inode_;
    std::string durable = inode.data;
    if (!inode.diverged.empty()) {
      // Pages a failed sync marked clean are not written again unless they were rewritten.
      const std::uint64_t page = fs_->model_.page_bytes;
      std::set<std::uint64_t> rewritten;
      for (const Op& op : inode.unsynced) {
        if (op.kind != Op::Kind::kWrite || op.bytes.empty()) continue;
        for (std::uint64_t p = op.offset / page; p <= (op.offset + op.bytes.size() - 1) / page;
             ++p) {
          rewritten.insert(p);
        }
      }
      for (auto it = inode.diverged.begin(); it != inode.diverged.end();) {
        if (rewritten.contains(*it)) {
          it = inode.diverged.erase(it);
          continue;
        }
        for (std::uint64_t b = *it * page; b < (*it + 1) * page && b < durable.size(); ++b) {
          durable[b] = b < inode.durable.size() ? inode.durable[b] : '\0';
        }
        ++it;
      }
    }
    inode.durable = std::move(durable);
    inode.unsynced.clear();
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

SimFileSystem::SimFileSystem(std::uint64_t seed, CrashModel model)
    : model_(model), fault_rng_(seed) {
  dirs_.insert("/");
}
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
    RecordDirOpLocked(DirOp{DirOp::Kind::kCreate, path, {}, inode});
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
  names_[to] = inode;
  RecordDirOpLocked(DirOp{DirOp::Kind::kRename, from, to, std::move(inode)});
  return Status::Ok();
}

Status SimFileSystem::Remove(const std::string& path) {
  EPOCH_RETURN_IF_ERROR(CheckFault(FsOp::kRemove, path));
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  const auto it = names_.find(path);
  if (it == names_.end()) return Status::NotFound(fmt::format("remove {}: no such file", path));
  InodePtr inode = it->second;
  names_.erase(it);
  RecordDirOpLocked(DirOp{DirOp::Kind::kRemove, path, {}, std::move(inode)});
  return Status::Ok();
}

Status SimFileSystem::SyncDir(const std::string& path) {
  const Status fault = CheckFault(FsOp::kSyncDir, path);
  std::lock_guard lock(mu_);
  EPOCH_RETURN_IF_ERROR(CheckUpLocked(path));
  if (!dirs_.contains(path)) return Status::NotFound(fmt::format("fsync {}: no such dir", path));
  if (!fault.ok()) {
    FailSyncDirLocked(path);
    return fault;
  }
  const std::vector<bool> synced = SyncedByLocked(path);
  std::vector<DirOp> rest;
  for (std::size_t i = 0; i < dir_ops_.size(); ++i) {
    if (synced[i]) {
      (void)ApplyDirOp(dir_ops_[i], durable_names_);
    } else {
      rest.push_back(std::move(dir_ops_[i]));
    }
  }
  dir_ops_ = std::move(rest);
  stats_.dir_syncs++;
  return Status::Ok();
}

void SimFileSystem::RecordDirOpLocked(DirOp op) { dir_ops_.push_back(std::move(op)); }

std::vector<bool> SimFileSystem::SyncedByLocked(const std::string& dir) const {
  // fsync(dir) makes the operations on its entries durable, and with them every earlier
  // operation on the same names (an entry renamed into `dir` needs its create).
  std::vector<bool> synced(dir_ops_.size(), false);
  std::set<std::string> needed;
  for (std::size_t i = dir_ops_.size(); i-- > 0;) {
    const DirOp& op = dir_ops_[i];
    const bool in_dir =
        ParentOf(op.path) == dir || (op.kind == DirOp::Kind::kRename && ParentOf(op.to) == dir);
    if (!in_dir && !needed.contains(op.path) &&
        !(op.kind == DirOp::Kind::kRename && needed.contains(op.to))) {
      continue;
    }
    synced[i] = true;
    needed.insert(op.path);
    if (op.kind == DirOp::Kind::kRename) needed.insert(op.to);
  }
  return synced;
}

bool SimFileSystem::ApplyDirOp(const DirOp& op, std::map<std::string, InodePtr>& names) {
  const auto it = names.find(op.path);
  switch (op.kind) {
    case DirOp::Kind::kCreate:
      if (it != names.end()) return false;
      names[op.path] = op.inode;
      return true;
    case DirOp::Kind::kRename:
      if (it == names.end() || it->second != op.inode) return false;
      names.erase(it);
      names[op.to] = op.inode;
      return true;
    case DirOp::Kind::kRemove:
      if (it == names.end() || it->second != op.inode) return false;
      names.erase(it);
      return true;
  }
  return false;
}

void SimFileSystem::FailSyncDirLocked(const std::string& dir) {
  // The failed fsync settles the directory's pending operations for good: each reached the
  // disk or not, and a later fsync does not write the others.
  const std::vector<bool> settled = SyncedByLocked(dir);
  std::vector<DirOp> rest;
  for (std::size_t i = 0; i < dir_ops_.size(); ++i) {
    if (!settled[i]) {
      rest.push_back(std::move(dir_ops_[i]));
    } else if ((fault_rng_() & 1) != 0 && ApplyDirOp(dir_ops_[i], durable_names_)) {
      crash_stats_.dir_ops_kept++;
    } else {
      crash_stats_.dir_ops_lost++;
    }
  }
  dir_ops_ = std::move(rest);
}

void SimFileSystem::FailSyncLocked(Inode& inode) {
  // Linux after a writeback error: the dirty pages are marked clean, some reached the disk and
  // some did not, and the next fsync reports success without writing them (fsyncgate).
  if (inode.unsynced.empty()) return;
  CrashStats stats;
  stats.files = 1;
  std::string settled = PowerLossImage(inode, fault_rng_, stats);
  const std::uint64_t page = model_.page_bytes;
  for (const Op& op : inode.unsynced) {
    if (op.kind != Op::Kind::kWrite || op.bytes.empty()) continue;
    for (std::uint64_t p = op.offset / page; p <= (op.offset + op.bytes.size() - 1) / page; ++p) {
      inode.diverged.insert(p);
    }
  }
  inode.durable = std::move(settled);
  inode.unsynced.clear();
  crash_stats_ += stats;
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

CrashStats SimFileSystem::CrashRandom(std::uint64_t seed) {
  std::lock_guard lock(mu_);
  Rng rng(seed);
  CrashStats stats;
  // Files, in a fixed order (so the seed replays): every inode any name refers to.
  std::set<Inode*> done;
  const auto settle = [&](const InodePtr& inode) {
    if (!done.insert(inode.get()).second) return;
    if (!inode->unsynced.empty()) {
      stats.files++;
      inode->durable = PowerLossImage(*inode, rng, stats);
    }
    inode->data = inode->durable;
    inode->unsynced.clear();
    inode->diverged.clear();
  };
  for (const auto& [path, inode] : names_) settle(inode);
  for (const auto& [path, inode] : durable_names_) settle(inode);
  for (const DirOp& op : dir_ops_) settle(op.inode);

  // Names: the durable ones, plus the unsynced operations that survive.
  DirOpOrder order = model_.dir_order;
  if (order == DirOpOrder::kRandom) {
    order = (rng() & 1) != 0 ? DirOpOrder::kPrefix : DirOpOrder::kAnySubset;
  }
  constexpr std::array<std::uint64_t, 4> kKeepPercent = {0, 50, 90, 100};
  const std::uint64_t keep_percent = kKeepPercent[rng() % kKeepPercent.size()];
  const std::size_t prefix = dir_ops_.empty() ? 0 : rng() % (dir_ops_.size() + 1);
  std::map<std::string, InodePtr> names = durable_names_;
  for (std::size_t i = 0; i < dir_ops_.size(); ++i) {
    const bool lands = order == DirOpOrder::kPrefix ? i < prefix : rng() % 100 < keep_percent;
    // An operation whose inputs did not survive cannot land (its file or name is not there).
    if (lands && ApplyDirOp(dir_ops_[i], names)) {
      stats.dir_ops_kept++;
    } else {
      stats.dir_ops_lost++;
    }
  }
  names_ = names;
  durable_names_ = std::move(names);
  dir_ops_.clear();
  ResetCrashedLocked();
  crash_stats_ += stats;
  return stats;
}

void SimFileSystem::CrashLocked(const std::map<std::string, FileCrashPlan>& plans,
                                std::uint64_t seed) {
  Rng rng(seed);
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
    inode->diverged.clear();
  };
  // Plans are keyed by the names the test sees before the crash.
  for (const auto& [path, inode] : names_) apply(path, inode);
  for (const auto& [path, inode] : durable_names_) apply(path, inode);
  for (const DirOp& op : dir_ops_) apply(op.path, op.inode);
  names_ = durable_names_;
  dir_ops_.clear();
  ResetCrashedLocked();
}

void SimFileSystem::ResetCrashedLocked() {
  locks_.clear();
  ++crash_epoch_;
  down_ = true;
}

std::string SimFileSystem::PowerLossImage(const Inode& inode, Rng& rng, CrashStats& stats) const {
  const std::vector<Op>& ops = inode.unsynced;
  const std::size_t n = ops.size();
  if (std::any_of(ops.begin(), ops.end(),
                  [](const Op& op) { return op.kind == Op::Kind::kTruncate; })) {
    // A shrinking truncate frees blocks, which the page model does not follow: an in-order
    // prefix lands (a legal outcome; the WAL never truncates a file).
    std::string image = inode.durable;
    const std::size_t full = rng() % (n + 1);
    for (std::size_t i = 0; i < full; ++i) ops[i].ApplyTo(image);
    stats.pages_kept += full;
    stats.pages_lost += n - full;
    return image;
  }
  const std::uint64_t page = model_.page_bytes;
  const std::uint64_t sector = std::min(model_.sector_bytes, page);

  // The size: as after some prefix of the operations (metadata is journalled in order).
  std::vector<std::uint64_t> sizes{inode.durable.size()};
  for (const Op& op : ops) {
    std::uint64_t end = op.kind == Op::Kind::kWrite ? op.offset + op.bytes.size() : op.size;
    sizes.push_back(std::max(sizes.back(), end));
  }
  const std::size_t size_point = (rng() & 1) != 0 ? n : rng() % (n + 1);
  const std::uint64_t size = sizes[size_point];
  if (size < sizes[n]) stats.sizes_cut++;

  // Which writes touched each page, in order.
  std::map<std::uint64_t, std::vector<std::size_t>> touched;
  for (std::size_t i = 0; i < n; ++i) {
    const Op& op = ops[i];
    if (op.kind != Op::Kind::kWrite || op.bytes.empty()) continue;
    for (std::uint64_t p = op.offset / page; p <= (op.offset + op.bytes.size() - 1) / page; ++p) {
      touched[p].push_back(i);
    }
  }

  // How much survives varies per file, so that "everything", "nothing" and mixes all occur.
  constexpr std::array<std::uint64_t, 5> kKeepPercent = {0, 25, 50, 75, 100};
  const std::uint64_t keep_percent = kKeepPercent[rng() % kKeepPercent.size()];
  const std::uint64_t torn_percent = (rng() & 1) != 0 ? 0 : 30;
  std::string image = inode.durable;
  image.resize(size, '\0');
  // Out of order: some page survived that was written after (a later write, or a later page
  // of the same write) a page that was lost.
  using Order = std::pair<std::size_t, std::uint64_t>;  // (write, page)
  std::optional<Order> first_lost;
  std::optional<Order> last_kept;
  std::string before(page, '\0');
  std::string after(page, '\0');
  std::vector<char> dirty(page);
  for (const auto& [p, writes] : touched) {
    const std::uint64_t base = p * page;
    if (base >= size || rng() % 100 >= keep_percent) {
      stats.pages_lost++;
      first_lost = std::min(first_lost.value_or(Order{SIZE_MAX, 0}), Order{writes.front(), p});
      continue;
    }
    // Usually the latest content; sometimes an earlier one (written back in between).
    std::size_t version = writes.size();
    if (writes.size() > 1 && rng() % 4 == 0) version = 1 + rng() % writes.size();
    std::fill(before.begin(), before.end(), '\0');
    if (base < inode.durable.size()) {
      inode.durable.copy(before.data(), page, base);
    }
    after = before;
    std::fill(dirty.begin(), dirty.end(), 0);
    for (std::size_t v = 0; v < version; ++v) {
      const Op& op = ops[writes[v]];
      const std::uint64_t from = std::max(op.offset, base);
      const std::uint64_t to = std::min(op.offset + op.bytes.size(), base + page);
      std::copy_n(op.bytes.data() + (from - op.offset), to - from,
                  after.begin() + static_cast<std::ptrdiff_t>(from - base));
      std::fill(dirty.begin() + static_cast<std::ptrdiff_t>(from - base),
                dirty.begin() + static_cast<std::ptrdiff_t>(to - base), 1);
    }
    if (rng() % 100 < torn_percent) {
      // A torn page: whole sectors land or not, and one is cut at a byte, the rest of it old or
      // garbage. Only bytes the writes changed can change.
      const std::uint64_t sectors = page / sector;
      const std::uint64_t cut_sector = rng() % sectors;
      const std::uint64_t cut = rng() % sector;
      const bool garbage = (rng() & 1) != 0;
      for (std::uint64_t sc = 0; sc < sectors; ++sc) {
        const bool lands = sc == cut_sector || (rng() & 1) != 0;
        for (std::uint64_t b = sc * sector; b < (sc + 1) * sector; ++b) {
          if (dirty[b] == 0) continue;
          if (!lands) {
            after[b] = before[b];
          } else if (sc == cut_sector && b - sc * sector >= cut) {
            after[b] = garbage ? static_cast<char>(rng() & 0xff) : before[b];
          }
        }
      }
      stats.pages_torn++;
    } else if (version < writes.size()) {
      stats.pages_older++;
    } else {
      stats.pages_kept++;
    }
    last_kept = std::max(last_kept.value_or(Order{0, 0}), Order{writes[version - 1], p});
    const std::uint64_t len = std::min<std::uint64_t>(page, size - base);
    image.replace(base, len, after, 0, len);
  }
  if (first_lost && last_kept && *last_kept > *first_lost) stats.files_reordered++;
  return image;
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

CrashStats SimFileSystem::crash_stats() const {
  std::lock_guard lock(mu_);
  return crash_stats_;
}

}  // namespace epoch::wal
