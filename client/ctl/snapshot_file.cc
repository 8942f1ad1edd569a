// Snapshot file verification and key count (see snapshot_file.h and server/SNAPSHOT.md §1).
#include "snapshot_file.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "epoch/snapshot_format/snapshot_format.h"

namespace epoch::ctl {
namespace {

namespace format = snapshot_format;

// The file at `path` opened for ReadAt calls.
class ArchiveReader {
 public:
  explicit ArchiveReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {}

  [[nodiscard]] bool ok() const { return static_cast<bool>(in_); }
  std::uint64_t Size() {
    in_.seekg(0, std::ios::end);
    return static_cast<std::uint64_t>(in_.tellg());
  }
  format::ReadAt Reader() {
    return [this](std::uint64_t offset, char* out, std::size_t n) {
      in_.clear();
      in_.seekg(static_cast<std::streamoff>(offset));
      if (!in_.read(out, static_cast<std::streamsize>(n))) {
        return Status::IOError(fmt::format("{}: read failed", path_));
      }
      return Status::Ok();
    };
  }

 private:
  const std::string& path_;
  std::ifstream in_;
};

SnapshotInfo Describe(const format::VerifiedHead& head, std::uint64_t size) {
  const format::Header& h = head.header;
  SnapshotInfo info;
  for (unsigned char b : head.sha256) info.sha256_hex += fmt::format("{:02x}", b);
  info.applied_index = h.applied_index.value();
  info.applied_term = h.applied_term.value();
  info.revision = h.revision.value();
  info.cluster_id = h.cluster_id;
  info.created_unix_ms = h.created_unix_ms;
  for (NodeId id : h.conf.voters) info.voters.push_back(id.value());
  for (NodeId id : h.conf.learners) info.learners.push_back(id.value());
  info.file_count = h.file_count;
  info.total_bytes = size;
  return info;
}

Result<format::VerifiedHead> VerifyHead(const std::string& path, ArchiveReader& reader,
                                        std::uint64_t* size) {
  if (!reader.ok()) return Status::IOError(fmt::format("cannot open {}", path));
  *size = reader.Size();
  return format::VerifyTrailerAndHeader(path, *size, reader.Reader());
}

// A directory made by mkdtemp, removed with everything in it when this goes away.
class TempDirectory {
 public:
  static Result<std::unique_ptr<TempDirectory>> Create() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "epochctl-snapshot-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      return Status::IOError(
          fmt::format("cannot create a directory like {}: {}", pattern, std::strerror(errno)));
    }
    return std::unique_ptr<TempDirectory>(new TempDirectory(pattern));
  }
  ~TempDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  explicit TempDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Writes each file entry under `dir` as ReadEntries hands it out.
format::EntryVisitor UnpackInto(const std::string& dir, std::ofstream& out, std::string& name) {
  return format::EntryVisitor{
      [&dir, &out, &name](std::string_view file, std::uint64_t) {
        name = dir + "/" + std::string(file);
        if (std::filesystem::exists(name)) {
          return Status::Corruption(fmt::format("file {} appears twice in the snapshot", file));
        }
        out = std::ofstream(name, std::ios::binary | std::ios::trunc);
        return out ? Status::Ok() : Status::IOError(fmt::format("cannot create {}", name));
      },
      [&out, &name](std::uint64_t, std::string_view data) {
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
        return out ? Status::Ok() : Status::IOError(fmt::format("write to {} failed", name));
      },
      [&out, &name] {
        out.close();
        return out ? Status::Ok() : Status::IOError(fmt::format("write to {} failed", name));
      }};
}

Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  return Status::Corruption(fmt::format("{}: {}", what, s.ToString()));
}

// Opens the RocksDB image in `dir` read-only with every column family it has and counts the
// records of all of them.
Result<std::uint64_t> CountRecords(const std::string& dir, const std::string& path) {
  const std::string what = fmt::format("{}: the image is not a readable store", path);
  std::vector<std::string> families;
  EPOCH_RETURN_IF_ERROR(
      FromRocks(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &families), what));
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& family : families) {
    descriptors.emplace_back(family, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  EPOCH_RETURN_IF_ERROR(FromRocks(
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, descriptors, &handles, &raw), what));
  std::unique_ptr<rocksdb::DB> db(raw);
  std::uint64_t count = 0;
  Status status;
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    if (status.ok()) {
      std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handle));
      for (it->SeekToFirst(); it->Valid(); it->Next()) ++count;
      status = FromRocks(it->status(), what);
    }
    (void)db->DestroyColumnFamilyHandle(handle);
  }
  if (!status.ok()) return status;
  return count;
}

}  // namespace

std::uint32_t SnapshotInfo::Hash32() const {
  return static_cast<std::uint32_t>(std::stoul(sha256_hex.substr(0, 8), nullptr, 16));
}

Result<SnapshotInfo> ReadSnapshotInfo(const std::string& path) {
  ArchiveReader reader(path);
  std::uint64_t size = 0;
  Result<format::VerifiedHead> head = VerifyHead(path, reader, &size);
  if (!head.ok()) return head.status();
  return Describe(*head, size);
}

Result<SnapshotInfo> ReadSnapshotStatus(const std::string& path) {
  ArchiveReader reader(path);
  std::uint64_t size = 0;
  Result<format::VerifiedHead> head = VerifyHead(path, reader, &size);
  if (!head.ok()) return head.status();
  Result<std::unique_ptr<TempDirectory>> dir = TempDirectory::Create();
  if (!dir.ok()) return dir.status();
  std::ofstream out;
  std::string name;
  EPOCH_RETURN_IF_ERROR(
      format::ReadEntries(path, *head, reader.Reader(), UnpackInto((*dir)->path(), out, name)));
  Result<std::uint64_t> keys = CountRecords((*dir)->path(), path);
  if (!keys.ok()) return keys.status();
  SnapshotInfo info = Describe(*head, size);
  info.total_keys = *keys;
  return info;
}

}  // namespace epoch::ctl
