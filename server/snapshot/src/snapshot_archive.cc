// The snapshot archive (server/SNAPSHOT.md): writer as a pull stream, verifier and unpacker as two
// passes over the file (SHA-256 first, then the structure), each file checked by its CRC-32C.
#include "epoch/snapshot/snapshot_archive.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <optional>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"
#include "epoch/snapshot/snapshot_io.h"

namespace epoch::server {
namespace {

namespace sio = snapshot_io;

constexpr std::string_view kMagic = "EPOCHSNP";
constexpr std::string_view kEndMarker = "EPOCHEND";
constexpr std::uint32_t kMaxHeaderBodyBytes = 1 << 20;
constexpr std::uint32_t kMaxMembers = 1024;
constexpr std::size_t kIoBytes = 1 << 20;

std::string EncodeHeaderBody(const ArchiveHeader& h) {
  std::string body;
  PutBigEndian64(&body, h.applied_index.value());
  PutBigEndian64(&body, h.applied_term.value());
  PutBigEndian64(&body, static_cast<std::uint64_t>(h.revision.value()));
  PutBigEndian64(&body, h.cluster_id);
  PutBigEndian64(&body, static_cast<std::uint64_t>(h.created_unix_ms));
  PutBigEndian32(&body, static_cast<std::uint32_t>(h.conf.voters.size()));
  for (NodeId id : h.conf.voters) PutBigEndian64(&body, id.value());
  PutBigEndian32(&body, static_cast<std::uint32_t>(h.conf.learners.size()));
  for (NodeId id : h.conf.learners) PutBigEndian64(&body, id.value());
  PutBigEndian32(&body, h.file_count);
  return body;
}

// magic | version | body length | body | crc32c(body)
std::string EncodeHeader(const ArchiveHeader& h) {
  std::string body = EncodeHeaderBody(h);
  std::string out(kMagic);
  PutBigEndian32(&out, kArchiveVersion);
  PutBigEndian32(&out, static_cast<std::uint32_t>(body.size()));
  out += body;
  PutBigEndian32(&out, crc32c::Value(body));
  return out;
}

// u16 name length | name | u64 size
std::string EncodeFilePrefix(const ArchiveFile& f) {
  std::string out;
  PutBigEndian16(&out, static_cast<std::uint16_t>(f.name.size()));
  out += f.name;
  PutBigEndian64(&out, f.size);
  return out;
}

std::uint64_t PaddingFor(std::uint64_t payload_bytes) {
  return (kArchiveAlign - payload_bytes % kArchiveAlign) % kArchiveAlign;
}

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
    if (!sio::IsSafeFileName(name)) {
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
    AddLiteral(EncodeHeader(h));
    for (std::size_t i = 0; i < files_.size(); ++i) {
      AddLiteral(EncodeFilePrefix(files_[i]));
      segments_.push_back(Segment{Kind::kFileData, {}, i, files_[i].size});
      segments_.push_back(Segment{Kind::kFileCrc, {}, i, 4});
    }
    AddLiteral(std::string(kEndMarker));
    std::uint64_t payload = 0;
    for (const Segment& s : segments_) payload += s.size;
    AddLiteral(std::string(PaddingFor(payload), '\0'));
    segments_.push_back(Segment{Kind::kTrailer, {}, 0, kArchiveTrailerBytes});
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
  sio::Sha256 sha_;
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

// Sequential reads of the payload with the position kept, for clear "at offset" messages.
class PayloadReader {
 public:
  PayloadReader(const sio::File& file, const std::string& path, std::uint64_t payload_bytes)
      : file_(file), path_(path), end_(payload_bytes) {}

  [[nodiscard]] std::uint64_t offset() const { return offset_; }
  [[nodiscard]] std::uint64_t remaining() const { return end_ - offset_; }

  Result<std::string> Read(std::uint64_t n, std::string_view what) {
    if (n > remaining()) {
      return Status::Corruption(fmt::format("{}: {} at offset {} runs past the end of the payload",
                                            path_, what, offset_));
    }
    std::string out(n, '\0');
    EPOCH_RETURN_IF_ERROR(sio::ReadAt(file_, path_, offset_, out.data(), n));
    offset_ += n;
    return out;
  }

  Result<std::uint64_t> ReadInt(int bytes, std::string_view what) {
    Result<std::string> raw = Read(static_cast<std::uint64_t>(bytes), what);
    if (!raw.ok()) return raw.status();
    return GetBigEndian(raw->data(), bytes);
  }

 private:
  const sio::File& file_;
  const std::string& path_;
  const std::uint64_t end_;
  std::uint64_t offset_ = 0;
};

Result<ArchiveHeader> DecodeHeaderBody(std::string_view body, const std::string& path) {
  auto bad = [&](std::string_view what) {
    return Status::Corruption(fmt::format("{}: malformed snapshot header ({})", path, what));
  };
  std::size_t pos = 0;
  auto take = [&](int bytes) -> std::optional<std::uint64_t> {
    if (pos + static_cast<std::size_t>(bytes) > body.size()) return std::nullopt;
    std::uint64_t v = GetBigEndian(body.data() + pos, bytes);
    pos += static_cast<std::size_t>(bytes);
    return v;
  };
  ArchiveHeader h;
  auto applied = take(8), term = take(8), revision = take(8), cluster = take(8), created = take(8);
  if (!created) return bad("too short");
  h.applied_index = LogIndex(*applied);
  h.applied_term = Term(*term);
  h.revision = Revision(static_cast<std::int64_t>(*revision));
  h.cluster_id = *cluster;
  h.created_unix_ms = static_cast<std::int64_t>(*created);
  for (std::vector<NodeId>* ids : {&h.conf.voters, &h.conf.learners}) {
    auto n = take(4);
    if (!n || *n > kMaxMembers) return bad("member count");
    for (std::uint64_t i = 0; i < *n; ++i) {
      auto id = take(8);
      if (!id) return bad("member list");
      ids->emplace_back(*id);
    }
  }
  auto files = take(4);
  if (!files) return bad("file count");
  h.file_count = static_cast<std::uint32_t>(*files);
  if (pos != body.size()) return bad("trailing bytes");
  return h;
}

Result<ArchiveHeader> ReadHeader(PayloadReader& in, const std::string& path) {
  Result<std::string> magic = in.Read(kMagic.size(), "magic");
  if (!magic.ok()) return magic.status();
  if (*magic != kMagic) {
    return Status::InvalidArgument(fmt::format(
        "{} is not an Epoch snapshot (bad magic; etcd's own bbolt snapshots cannot be restored "
        "into Epoch)",
        path));
  }
  Result<std::uint64_t> version = in.ReadInt(4, "version");
  if (!version.ok()) return version.status();
  if (*version != kArchiveVersion) {
    return Status::InvalidArgument(fmt::format(
        "{}: snapshot format version {} is not supported (this epochd reads version {})", path,
        *version, kArchiveVersion));
  }
  Result<std::uint64_t> body_len = in.ReadInt(4, "header length");
  if (!body_len.ok()) return body_len.status();
  if (*body_len > kMaxHeaderBodyBytes) {
    return Status::Corruption(fmt::format("{}: header length {} is too large", path, *body_len));
  }
  Result<std::string> body = in.Read(*body_len, "header");
  if (!body.ok()) return body.status();
  Result<std::uint64_t> crc = in.ReadInt(4, "header checksum");
  if (!crc.ok()) return crc.status();
  if (*crc != crc32c::Value(*body)) {
    return Status::Corruption(fmt::format("{}: header checksum mismatch", path));
  }
  return DecodeHeaderBody(*body, path);
}

// Reads one file entry; writes its content to `dest_dir` when given.
Status ReadFileEntry(PayloadReader& in, const std::string& path,
                     const std::optional<std::string>& dest_dir) {
  const std::uint64_t entry_offset = in.offset();
  Result<std::uint64_t> name_len = in.ReadInt(2, "file name length");
  if (!name_len.ok()) return name_len.status();
  Result<std::string> name = in.Read(*name_len, "file name");
  if (!name.ok()) return name.status();
  if (!sio::IsSafeFileName(*name)) {
    return Status::Corruption(
        fmt::format("{}: file entry at offset {} has a bad name", path, entry_offset));
  }
  Result<std::uint64_t> size = in.ReadInt(8, "file size");
  if (!size.ok()) return size.status();
  if (*size > in.remaining()) {
    return Status::Corruption(
        fmt::format("{}: file {} claims {} bytes, past the end", path, *name, *size));
  }
  std::optional<sio::File> out;
  std::string out_path;
  if (dest_dir) {
    out_path = *dest_dir + "/" + *name;
    if (std::filesystem::exists(out_path)) {
      return Status::Corruption(fmt::format("{}: file {} appears twice", path, *name));
    }
    Result<sio::File> f = sio::OpenForWrite(out_path);
    if (!f.ok()) return f.status();
    out = std::move(*f);
  }
  std::uint32_t crc = 0;
  for (std::uint64_t done = 0; done < *size;) {
    std::uint64_t n = std::min<std::uint64_t>(kIoBytes, *size - done);
    Result<std::string> data = in.Read(n, "file data");
    if (!data.ok()) return data.status();
    crc = crc32c::Extend(crc, data->data(), data->size());
    if (out) EPOCH_RETURN_IF_ERROR(sio::WriteAt(*out, out_path, done, *data));
    done += n;
  }
  Result<std::uint64_t> stored = in.ReadInt(4, "file checksum");
  if (!stored.ok()) return stored.status();
  if (*stored != crc) {
    return Status::Corruption(fmt::format("{}: checksum mismatch in file {}", path, *name));
  }
  if (out) EPOCH_RETURN_IF_ERROR(sio::SyncFile(*out, out_path));
  return Status::Ok();
}

Result<ArchiveHeader> ReadArchive(const std::string& path,
                                  const std::optional<std::string>& dest_dir) {
  Result<std::uint64_t> size = sio::FileSize(path);
  if (!size.ok()) return size.status();
  if (*size < kArchiveAlign + kArchiveTrailerBytes ||
      *size % kArchiveAlign != kArchiveTrailerBytes) {
    return Status::Corruption(fmt::format(
        "{} is truncated or not a snapshot: its size {} is not 32 bytes more than a multiple of "
        "512 (payload + SHA-256 trailer)",
        path, *size));
  }
  Result<sio::File> file = sio::OpenForRead(path);
  if (!file.ok()) return file.status();
  const std::uint64_t payload_bytes = *size - kArchiveTrailerBytes;

  // Pass 1: the SHA-256 trailer over the whole payload.
  sio::Sha256 sha;
  std::string buf;
  for (std::uint64_t at = 0; at < payload_bytes;) {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kIoBytes, payload_bytes - at));
    buf.resize(n);
    EPOCH_RETURN_IF_ERROR(sio::ReadAt(*file, path, at, buf.data(), n));
    sha.Update(buf);
    at += n;
  }
  auto digest = sha.Finish();
  std::array<char, kArchiveTrailerBytes> trailer{};
  EPOCH_RETURN_IF_ERROR(sio::ReadAt(*file, path, payload_bytes, trailer.data(), trailer.size()));
  if (std::memcmp(digest.data(), trailer.data(), trailer.size()) != 0) {
    return Status::Corruption(fmt::format(
        "{}: SHA-256 checksum mismatch: the file is corrupted or was cut and padded", path));
  }

  // Pass 2: the structure.
  PayloadReader in(*file, path, payload_bytes);
  Result<ArchiveHeader> header = ReadHeader(in, path);
  if (!header.ok()) return header.status();
  for (std::uint32_t i = 0; i < header->file_count; ++i) {
    EPOCH_RETURN_IF_ERROR(ReadFileEntry(in, path, dest_dir));
  }
  Result<std::string> end = in.Read(kEndMarker.size(), "end marker");
  if (!end.ok()) return end.status();
  if (*end != kEndMarker) {
    return Status::Corruption(
        fmt::format("{}: no end marker after {} files", path, header->file_count));
  }
  if (in.remaining() >= kArchiveAlign) {
    return Status::Corruption(
        fmt::format("{}: {} unexpected bytes after the end marker", path, in.remaining()));
  }
  Result<std::string> pad = in.Read(in.remaining(), "padding");
  if (!pad.ok()) return pad.status();
  if (std::any_of(pad->begin(), pad->end(), [](char c) { return c != '\0'; })) {
    return Status::Corruption(fmt::format("{}: non-zero padding", path));
  }
  return header;
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
