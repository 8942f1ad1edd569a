// The snapshot archive format (see snapshot_format.h and server/SNAPSHOT.md §1).
#include "epoch/snapshot_format/snapshot_format.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"

namespace epoch::snapshot_format {
namespace {

constexpr std::size_t kIoBytes = 1 << 20;
constexpr std::size_t kHeaderPrefixBytes = kMagic.size() + 4 + 4;  // magic, version, body length
constexpr std::size_t kHeaderCrcBytes = 4;

std::string EncodeHeaderBody(const Header& h) {
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

Result<Header> DecodeHeaderBody(std::string_view body, std::string_view path) {
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
  Header h;
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

}  // namespace

std::string EncodeHeader(const Header& header) {
  const std::string body = EncodeHeaderBody(header);
  std::string out(kMagic);
  PutBigEndian32(&out, kVersion);
  PutBigEndian32(&out, static_cast<std::uint32_t>(body.size()));
  out += body;
  PutBigEndian32(&out, crc32c::Value(body));
  return out;
}

Result<Header> DecodeHeader(std::string_view bytes, std::string_view path,
                            std::size_t* header_bytes) {
  std::size_t pos = 0;
  auto read = [&](std::size_t n, std::string_view what) -> Result<std::string_view> {
    if (n > bytes.size() - pos) {
      return Status::Corruption(
          fmt::format("{}: {} at offset {} runs past the end of the payload", path, what, pos));
    }
    std::string_view out = bytes.substr(pos, n);
    pos += n;
    return out;
  };
  Result<std::string_view> magic = read(kMagic.size(), "magic");
  if (!magic.ok()) return magic.status();
  if (*magic != kMagic) {
    return Status::InvalidArgument(fmt::format(
        "{} is not an Epoch snapshot (bad magic; etcd's own bbolt snapshots cannot be restored "
        "into Epoch)",
        path));
  }
  Result<std::string_view> version = read(4, "version");
  if (!version.ok()) return version.status();
  if (GetBigEndian32(version->data()) != kVersion) {
    return Status::InvalidArgument(
        fmt::format("{}: snapshot format version {} is not supported (this build reads version {})",
                    path, GetBigEndian32(version->data()), kVersion));
  }
  Result<std::string_view> body_len = read(4, "header length");
  if (!body_len.ok()) return body_len.status();
  if (GetBigEndian32(body_len->data()) > kMaxHeaderBodyBytes) {
    return Status::Corruption(
        fmt::format("{}: header length {} is too large", path, GetBigEndian32(body_len->data())));
  }
  Result<std::string_view> body = read(GetBigEndian32(body_len->data()), "header");
  if (!body.ok()) return body.status();
  Result<std::string_view> crc = read(kHeaderCrcBytes, "header checksum");
  if (!crc.ok()) return crc.status();
  if (GetBigEndian32(crc->data()) != crc32c::Value(*body)) {
    return Status::Corruption(fmt::format("{}: header checksum mismatch", path));
  }
  Result<Header> header = DecodeHeaderBody(*body, path);
  if (header.ok()) *header_bytes = pos;
  return header;
}

std::string EncodeFileEntryPrefix(std::string_view name, std::uint64_t size) {
  std::string out;
  PutBigEndian16(&out, static_cast<std::uint16_t>(name.size()));
  out += name;
  PutBigEndian64(&out, size);
  return out;
}

bool IsSafeFileName(std::string_view name) {
  if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
  for (char c : name) {
    if (c == '/' || c == '\0') return false;
  }
  return true;
}

Status CheckFileSize(std::string_view path, std::uint64_t file_bytes) {
  if (file_bytes < kAlign + kTrailerBytes || file_bytes % kAlign != kTrailerBytes) {
    return Status::Corruption(fmt::format(
        "{} is truncated or not a snapshot: its size {} is not 32 bytes more than a multiple of "
        "512 (payload + SHA-256 trailer)",
        path, file_bytes));
  }
  return Status::Ok();
}

struct Sha256::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  // Allocation or init failure of a built-in digest means the process is out of memory.
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1) std::abort();
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_->md); }

void Sha256::Update(std::string_view data) {
  if (EVP_DigestUpdate(ctx_->md, data.data(), data.size()) != 1) std::abort();
}

std::array<unsigned char, kTrailerBytes> Sha256::Finish() {
  std::array<unsigned char, kTrailerBytes> out{};
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_->md, out.data(), &n) != 1 || n != out.size()) std::abort();
  return out;
}

Result<VerifiedHead> VerifyTrailerAndHeader(std::string_view path, std::uint64_t file_bytes,
                                            const ReadAt& read_at) {
  EPOCH_RETURN_IF_ERROR(CheckFileSize(path, file_bytes));
  VerifiedHead head;
  head.payload_bytes = file_bytes - kTrailerBytes;

  Sha256 sha;
  std::string buf;
  for (std::uint64_t at = 0; at < head.payload_bytes;) {
    const auto n =
        static_cast<std::size_t>(std::min<std::uint64_t>(kIoBytes, head.payload_bytes - at));
    buf.resize(n);
    EPOCH_RETURN_IF_ERROR(read_at(at, buf.data(), n));
    sha.Update(buf);
    at += n;
  }
  head.sha256 = sha.Finish();
  std::array<char, kTrailerBytes> trailer{};
  EPOCH_RETURN_IF_ERROR(read_at(head.payload_bytes, trailer.data(), trailer.size()));
  if (std::memcmp(head.sha256.data(), trailer.data(), trailer.size()) != 0) {
    return Status::Corruption(fmt::format(
        "{}: SHA-256 checksum mismatch: the file is corrupted or was cut and padded", path));
  }

  // The header: its fixed prefix says how long the rest is (a payload is at least kAlign bytes).
  std::string bytes(kHeaderPrefixBytes, '\0');
  EPOCH_RETURN_IF_ERROR(read_at(0, bytes.data(), bytes.size()));
  const std::uint64_t body_len = std::min<std::uint64_t>(
      GetBigEndian32(bytes.data() + kMagic.size() + 4), kMaxHeaderBodyBytes);
  bytes.resize(static_cast<std::size_t>(std::min<std::uint64_t>(
      head.payload_bytes, kHeaderPrefixBytes + body_len + kHeaderCrcBytes)));
  EPOCH_RETURN_IF_ERROR(read_at(kHeaderPrefixBytes, bytes.data() + kHeaderPrefixBytes,
                                bytes.size() - kHeaderPrefixBytes));
  std::size_t header_bytes = 0;
  Result<Header> header = DecodeHeader(bytes, path, &header_bytes);
  if (!header.ok()) return header.status();
  head.header = std::move(*header);
  head.header_bytes = header_bytes;
  return head;
}

namespace {

// Sequential reads of the payload with the position kept, for clear "at offset" messages.
class PayloadReader {
 public:
  PayloadReader(std::string_view path, const ReadAt& read_at, std::uint64_t offset,
                std::uint64_t payload_bytes)
      : path_(path), read_at_(read_at), end_(payload_bytes), offset_(offset) {}

  [[nodiscard]] std::uint64_t offset() const { return offset_; }
  [[nodiscard]] std::uint64_t remaining() const { return end_ - offset_; }

  Result<std::string> Read(std::uint64_t n, std::string_view what) {
    if (n > remaining()) {
      return Status::Corruption(fmt::format("{}: {} at offset {} runs past the end of the payload",
                                            path_, what, offset_));
    }
    std::string out(static_cast<std::size_t>(n), '\0');
    EPOCH_RETURN_IF_ERROR(read_at_(offset_, out.data(), out.size()));
    offset_ += n;
    return out;
  }

  Result<std::uint64_t> ReadInt(int bytes, std::string_view what) {
    Result<std::string> raw = Read(static_cast<std::uint64_t>(bytes), what);
    if (!raw.ok()) return raw.status();
    return GetBigEndian(raw->data(), bytes);
  }

 private:
  std::string_view path_;
  const ReadAt& read_at_;
  const std::uint64_t end_;
  std::uint64_t offset_;
};

// One file entry: name, size, content (handed to the visitor in pieces), CRC-32C.
Status ReadFileEntry(PayloadReader& in, std::string_view path, const EntryVisitor& visitor) {
  const std::uint64_t entry_offset = in.offset();
  Result<std::uint64_t> name_len = in.ReadInt(2, "file name length");
  if (!name_len.ok()) return name_len.status();
  Result<std::string> name = in.Read(*name_len, "file name");
  if (!name.ok()) return name.status();
  if (!IsSafeFileName(*name)) {
    return Status::Corruption(
        fmt::format("{}: file entry at offset {} has a bad name", path, entry_offset));
  }
  Result<std::uint64_t> size = in.ReadInt(8, "file size");
  if (!size.ok()) return size.status();
  if (*size > in.remaining()) {
    return Status::Corruption(
        fmt::format("{}: file {} claims {} bytes, past the end", path, *name, *size));
  }
  if (visitor.begin_file) EPOCH_RETURN_IF_ERROR(visitor.begin_file(*name, *size));
  std::uint32_t crc = 0;
  for (std::uint64_t done = 0; done < *size;) {
    const std::uint64_t n = std::min<std::uint64_t>(kIoBytes, *size - done);
    Result<std::string> data = in.Read(n, "file data");
    if (!data.ok()) return data.status();
    crc = crc32c::Extend(crc, data->data(), data->size());
    if (visitor.file_data) EPOCH_RETURN_IF_ERROR(visitor.file_data(done, *data));
    done += n;
  }
  Result<std::uint64_t> stored = in.ReadInt(4, "file checksum");
  if (!stored.ok()) return stored.status();
  if (*stored != crc) {
    return Status::Corruption(fmt::format("{}: checksum mismatch in file {}", path, *name));
  }
  return visitor.end_file ? visitor.end_file() : Status::Ok();
}

}  // namespace

Status ReadEntries(std::string_view path, const VerifiedHead& head, const ReadAt& read_at,
                   const EntryVisitor& visitor) {
  PayloadReader in(path, read_at, head.header_bytes, head.payload_bytes);
  for (std::uint32_t i = 0; i < head.header.file_count; ++i) {
    EPOCH_RETURN_IF_ERROR(ReadFileEntry(in, path, visitor));
  }
  Result<std::string> end = in.Read(kEndMarker.size(), "end marker");
  if (!end.ok()) return end.status();
  if (*end != kEndMarker) {
    return Status::Corruption(
        fmt::format("{}: no end marker after {} files", path, head.header.file_count));
  }
  if (in.remaining() >= kAlign) {
    return Status::Corruption(
        fmt::format("{}: {} unexpected bytes after the end marker", path, in.remaining()));
  }
  Result<std::string> pad = in.Read(in.remaining(), "padding");
  if (!pad.ok()) return pad.status();
  if (std::any_of(pad->begin(), pad->end(), [](char c) { return c != '\0'; })) {
    return Status::Corruption(fmt::format("{}: non-zero padding", path));
  }
  return Status::Ok();
}

}  // namespace epoch::snapshot_format
