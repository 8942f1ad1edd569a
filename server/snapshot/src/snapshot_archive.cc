// The snapshot archive (server/SNAPSHOT.md): writer as a pull stream, verifier and unpacker as two
// passes over the file (SHA-256 first, then the structure), each file checked by its CRC-32C.
#include "epoch/snapshot/snapshot_archive.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"
#include "epoch/snapshot/snapshot_io.h"
#include "epoch/snapshot_format/snapshot_format.h"

namespace epoch::server {
namespace {

namespace sio = snapshot_io;
namespace format = snapshot_format;

constexpr std::size_t kIoBytes = 1 << 20;

}  // namespace

Result<std::vector<ArchiveFile>> ListCheckpointFiles(const std::string& dir) {
  std::vector<ArchiveFile> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file(ec)) {
      return Status::InvalidArgument(
          fmt::format("checkpoint {} holds {}, which is not a regular file", dir, name));
    }
    if (!format::IsSafeFileName(name)) {
      return Status::InvalidArgument(fmt::format("checkpoint file name '{}' is not allowed", name));
    }
    Result<std::uint64_t> size = sio::FileSize(entry.path().string());
    if (!size.ok()) return size.status();
    files.push_back(ArchiveFile{name, entry.path().string(), *size});
  }
  if (ec) return Status::IOError(fmt::format("list {}: {}", dir, ec.message()));
  std::sort(files.begin(), files.end(),
            [](const ArchiveFile& a, const ArchiveFile& b) { return a.name < b.name; });
  return files;
}

// The archive as a sequence of segments produced one after the other; everything before the
// trailer also goes into the SHA-256.
class ArchiveWriter::Impl {
 public:
  enum class Kind { kLiteral, kFileData, kFileCrc, kTrailer };
  struct Segment {
    Kind kind;
    std::string literal;     // kLiteral
    std::size_t file = 0;    // kFileData, kFileCrc
    std::uint64_t size = 0;  // bytes of this segment
  };

  Impl(const ArchiveHeader& header, std::vector<ArchiveFile> files) : files_(std::move(files)) {
    ArchiveHeader h = header;
    h.file_count = static_cast<std::uint32_t>(files_.size());
    AddLiteral(format::EncodeHeader(h));
    for (std::size_t i = 0; i < files_.size(); ++i) {
      AddLiteral(format::EncodeFileEntryPrefix(files_[i].name, files_[i].size));
      segments_.push_back(Segment{Kind::kFileData, {}, i, files_[i].size});
      segments_.push_back(Segment{Kind::kFileCrc, {}, i, 4});
    }
    AddLiteral(std::string(format::kEndMarker));
    std::uint64_t payload = 0;
    for (const Segment& s : segments_) payload += s.size;
    AddLiteral(std::string(format::PaddingFor(payload), '\0'));
    segments_.push_back(Segment{Kind::kTrailer, {}, 0, format::kTrailerBytes});
  }

  [[nodiscard]] std::uint64_t Total() const {
    std::uint64_t total = 0;
    for (const Segment& s : segments_) total += s.size;
    return total;
  }

  Result<std::string> Next(std::size_t max_bytes) {
    std::string out;
    while (out.size() < max_bytes && current_ < segments_.size()) {
      const Segment& seg = segments_[current_];
      const std::uint64_t want =
          std::min<std::uint64_t>(seg.size - offset_, max_bytes - out.size());
      std::string piece;
      switch (seg.kind) {
        case Kind::kLiteral: piece = seg.literal.substr(offset_, want); break;
        case Kind::kFileData: {
          Result<std::string> data = ReadFile(seg.file, want);
          if (!data.ok()) return data.status();
          piece = std::move(*data);
          break;
        }
        case Kind::kFileCrc: {
          std::string crc;
          PutBigEndian32(&crc, file_crc_);
          piece = crc.substr(offset_, want);
          break;
        }
        case Kind::kTrailer: {
          if (!trailer_) {
            auto digest = sha_.Finish();
            trailer_ = std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
          }
          piece = trailer_->substr(offset_, want);
          break;
        }
      }
      if (seg.kind != Kind::kTrailer) sha_.Update(piece);
      out += piece;
      offset_ += piece.size();
      if (offset_ == seg.size) {
        ++current_;
        offset_ = 0;
      }
    }
    return out;
  }

 private:
  void AddLiteral(std::string bytes) {
    std::uint64_t size = bytes.size();
    segments_.push_back(Segment{Kind::kLiteral, std::move(bytes), 0, size});
  }

  Result<std::string> ReadFile(std::size_t index, std::uint64_t n) {
    const ArchiveFile& f = files_[index];
    if (open_index_ != index) {
      Result<sio::File> file = sio::OpenForRead(f.path);
      if (!file.ok()) return file.status();
      Result<std::uint64_t> size = sio::FileSize(f.path);
      if (!size.ok()) return size.status();
      if (*size != f.size) {
        return Status::IOError(
            fmt::format("checkpoint file {} changed size ({} -> {})", f.path, f.size, *size));
      }
      open_file_ = std::move(*file);
      open_index_ = index;
      file_crc_ = 0;
    }
    std::string data(n, '\0');
    EPOCH_RETURN_IF_ERROR(sio::ReadAt(open_file_, f.path, offset_, data.data(), n));
    file_crc_ = crc32c::Extend(file_crc_, data.data(), data.size());
    return data;
  }

  std::vector<ArchiveFile> files_;
  std::vector<Segment> segments_;
  std::size_t current_ = 0;
  std::uint64_t offset_ = 0;  // within segments_[current_]
  format::Sha256 sha_;
  std::optional<std::string> trailer_;
  std::optional<std::size_t> open_index_;
  sio::File open_file_;
  std::uint32_t file_crc_ = 0;
};

ArchiveWriter::ArchiveWriter(ArchiveHeader header, std::vector<ArchiveFile> files)
    : impl_(std::make_unique<Impl>(header, std::move(files))), total_bytes_(impl_->Total()) {}

ArchiveWriter::~ArchiveWriter() = default;

Result<std::string> ArchiveWriter::Next(std::size_t max_bytes) {
  Result<std::string> piece = impl_->Next(max_bytes);
  if (piece.ok()) produced_ += piece->size();
  return piece;
}

Status WriteArchiveFile(const ArchiveHeader& header, std::vector<ArchiveFile> files,
                        const std::string& out_path) {
  ArchiveWriter writer(header, std::move(files));
  Result<sio::File> out = sio::OpenForWrite(out_path);
  if (!out.ok()) return out.status();
  if (::ftruncate(out->fd(), 0) != 0) return Status::IOError("truncate " + out_path);
  while (!writer.Done()) {
    std::uint64_t at = writer.BytesProduced();
    Result<std::string> piece = writer.Next(kIoBytes);
    if (!piece.ok()) return piece.status();
    EPOCH_RETURN_IF_ERROR(sio::WriteAt(*out, out_path, at, *piece));
  }
  return sio::SyncFile(*out, out_path);
}

namespace {

// Writes each file of the archive into `dest_dir` as format::ReadEntries hands it out; each file
// is fsynced once its CRC-32C matched.
class DirectoryWriter {
 public:
  DirectoryWriter(const std::string& archive_path, std::string dest_dir)
      : archive_path_(archive_path), dest_dir_(std::move(dest_dir)) {}

  format::EntryVisitor Visitor() {
    return format::EntryVisitor{
        [this](std::string_view name, std::uint64_t) { return Begin(name); },
        [this](std::uint64_t offset, std::string_view data) {
          return sio::WriteAt(*out_, out_path_, offset, data);
        },
        [this] { return sio::SyncFile(*out_, out_path_); }};
  }

 private:
  Status Begin(std::string_view name) {
    out_path_ = dest_dir_ + "/" + std::string(name);
    if (std::filesystem::exists(out_path_)) {
      return Status::Corruption(fmt::format("{}: file {} appears twice", archive_path_, name));
    }
    Result<sio::File> f = sio::OpenForWrite(out_path_);
    if (!f.ok()) return f.status();
    out_ = std::move(*f);
    return Status::Ok();
  }

  const std::string& archive_path_;
  const std::string dest_dir_;
  std::string out_path_;
  std::optional<sio::File> out_;
};

Result<ArchiveHeader> ReadArchive(const std::string& path,
                                  const std::optional<std::string>& dest_dir) {
  Result<std::uint64_t> size = sio::FileSize(path);
  if (!size.ok()) return size.status();
  EPOCH_RETURN_IF_ERROR(format::CheckFileSize(path, *size));
  Result<sio::File> file = sio::OpenForRead(path);
  if (!file.ok()) return file.status();
  const format::ReadAt read_at = [&](std::uint64_t offset, char* out, std::size_t n) {
    return sio::ReadAt(*file, path, offset, out, n);
  };

  // Pass 1: the SHA-256 trailer over the whole payload, then the header.
  Result<format::VerifiedHead> head = format::VerifyTrailerAndHeader(path, *size, read_at);
  if (!head.ok()) return head.status();

  // Pass 2: the file entries (written out when unpacking), the end marker and the padding.
  std::optional<DirectoryWriter> writer;
  if (dest_dir) writer.emplace(path, *dest_dir);
  EPOCH_RETURN_IF_ERROR(format::ReadEntries(path, *head, read_at,
                                            writer ? writer->Visitor() : format::EntryVisitor{}));
  return head->header;
}

}  // namespace

Result<ArchiveHeader> VerifyArchive(const std::string& archive_path) {
  return ReadArchive(archive_path, std::nullopt);
}

Result<ArchiveHeader> UnpackArchive(const std::string& archive_path, const std::string& dest_dir) {
  Result<bool> empty = sio::IsMissingOrEmpty(dest_dir);
  if (!empty.ok()) return empty.status();
  if (!*empty) {
    return Status::FailedPrecondition(
        fmt::format("{} is not empty: refusing to unpack into it", dest_dir));
  }
  // Verify completely before writing anything, so a bad file leaves no half-written directory.
  Result<ArchiveHeader> verified = VerifyArchive(archive_path);
  if (!verified.ok()) return verified.status();
  std::error_code ec;
  std::filesystem::create_directories(dest_dir, ec);
  if (ec) return Status::IOError(fmt::format("create {}: {}", dest_dir, ec.message()));
  Result<ArchiveHeader> header = ReadArchive(archive_path, dest_dir);
  if (!header.ok()) return header.status();
  EPOCH_RETURN_IF_ERROR(sio::SyncDir(dest_dir));
  return header;
}

}  // namespace epoch::server
