// Snapshot file verification (see snapshot_file.h and server/SNAPSHOT.md §1).
#include "snapshot_file.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <array>
#include <fstream>
#include <memory>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"

namespace epoch::ctl {
namespace {

constexpr std::string_view kMagic = "EPOCHSNP";
constexpr std::uint32_t kVersion = 1;
constexpr std::uint64_t kAlign = 512;
constexpr std::uint64_t kTrailer = 32;
constexpr std::uint32_t kMaxBody = 1 << 20;

// Big-endian reader over a byte string; every read checks the bounds.
class Reader {
 public:
  explicit Reader(const std::string& data) : data_(data) {}
  bool U32(std::uint32_t* v) { return Read(4, v); }
  bool U64(std::uint64_t* v) { return Read(8, v); }

 private:
  template <typename T>
  bool Read(std::size_t n, T* v) {
    if (pos_ + n > data_.size()) return false;
    *v = static_cast<T>(GetBigEndian(data_.data() + pos_, static_cast<int>(n)));
    pos_ += n;
    return true;
  }
  const std::string& data_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<SnapshotInfo> ReadSnapshotInfo(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(fmt::format("cannot open {}", path));
  in.seekg(0, std::ios::end);
  const std::uint64_t size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  if (size < kAlign + kTrailer || size % kAlign != kTrailer) {
    return Status::Corruption(fmt::format("{}: truncated or not a snapshot (size {})", path, size));
  }
  // Pass 1: SHA-256 of the payload, in 1 MiB pieces.
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  if (md == nullptr || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1) {
    return Status::IOError("SHA-256 unavailable");
  }
  std::string buffer(1 << 20, '\0');
  std::string head;
  for (std::uint64_t left = size - kTrailer; left > 0;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer.size()));
    if (!in.read(buffer.data(), static_cast<std::streamsize>(n))) {
      return Status::IOError(fmt::format("{}: read failed", path));
    }
    if (head.size() < 16 + kMaxBody + 4)
      head.append(buffer, 0, std::min<std::size_t>(n, 16 + kMaxBody + 4 - head.size()));
    EVP_DigestUpdate(md.get(), buffer.data(), n);
    left -= n;
  }
  std::array<unsigned char, 32> digest{};
  unsigned int digest_len = 0;
  EVP_DigestFinal_ex(md.get(), digest.data(), &digest_len);
  std::array<char, 32> trailer{};
  if (!in.read(trailer.data(), trailer.size()))
    return Status::IOError(fmt::format("{}: read failed", path));
  if (std::memcmp(trailer.data(), digest.data(), 32) != 0) {
    return Status::Corruption(
        fmt::format("{}: checksum mismatch: the file is corrupted or was cut and padded", path));
  }
  SnapshotInfo info;
  info.total_bytes = size;
  for (unsigned char b : digest) info.sha256_hex += fmt::format("{:02x}", b);
  // Pass 2: the header.
  if (head.compare(0, kMagic.size(), kMagic) != 0) {
    return Status::Corruption(fmt::format("{}: not an Epoch snapshot (bad magic)", path));
  }
  const std::uint32_t version = GetBigEndian32(head.data() + 8);
  if (version != kVersion) {
    return Status::Corruption(fmt::format("{}: unsupported snapshot version {}", path, version));
  }
  const std::uint32_t body_len = GetBigEndian32(head.data() + 12);
  if (body_len > kMaxBody || 16 + body_len + 4 > head.size()) {
    return Status::Corruption(fmt::format("{}: bad header length {}", path, body_len));
  }
  const std::string body = head.substr(16, body_len);
  if (GetBigEndian32(head.data() + 16 + body_len) != crc32c::Value(body)) {
    return Status::Corruption(fmt::format("{}: header checksum mismatch", path));
  }
  Reader r(body);
  std::uint64_t revision = 0, created = 0;
  std::uint32_t voters = 0, learners = 0;
  bool ok = r.U64(&info.applied_index) && r.U64(&info.applied_term) && r.U64(&revision) &&
            r.U64(&info.cluster_id) && r.U64(&created) && r.U32(&voters) && voters <= 1024;
  for (std::uint32_t i = 0; ok && i < voters; ++i) ok = r.U64(&info.voters.emplace_back());
  ok = ok && r.U32(&learners) && learners <= 1024;
  for (std::uint32_t i = 0; ok && i < learners; ++i) ok = r.U64(&info.learners.emplace_back());
  ok = ok && r.U32(&info.file_count);
  if (!ok) return Status::Corruption(fmt::format("{}: malformed header", path));
  info.revision = static_cast<std::int64_t>(revision);
  info.created_unix_ms = static_cast<std::int64_t>(created);
  return info;
}

}  // namespace epoch::ctl
