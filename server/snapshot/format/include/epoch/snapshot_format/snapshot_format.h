// The snapshot archive format (server/SNAPSHOT.md §1; keep the two in step): the file
// `etcdctl snapshot save` writes from Maintenance.Snapshot, `epochd --restore-snapshot` reads back
// and `epochctl snapshot status` describes. Its constants, the header, the prefix of a file entry,
// the padding and etcdctl's size rule, SHA-256, the check of a whole file's trailer and header, and
// the walk over its file entries.
// Depends on common/ only, so that epochd and epochctl share it.
//
// Who calls it: the server's snapshot layer (snapshot_archive.cc: the writer, VerifyArchive,
// UnpackArchive; snapshot_transfer.cc: file names) and epochctl (snapshot_file.cc: status, which
// unpacks the image to count its keys).
//
// Threading: pure functions; a Sha256 is used by one thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::snapshot_format {

inline constexpr std::string_view kMagic = "EPOCHSNP";
inline constexpr std::string_view kEndMarker = "EPOCHEND";
inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::size_t kAlign = 512;
inline constexpr std::size_t kTrailerBytes = 32;  // SHA-256 of the payload
inline constexpr std::uint32_t kMaxHeaderBodyBytes = 1 << 20;
inline constexpr std::uint32_t kMaxMembers = 1024;  // voters, and learners

// The cluster's membership when the image was taken.
struct Membership {
  std::vector<NodeId> voters;
  std::vector<NodeId> learners;

  friend bool operator==(const Membership&, const Membership&) = default;
};

// What the image is: the state machine after applying `applied_index` (of term `applied_term`),
// at store revision `revision`, taken from cluster `cluster_id` whose membership was `conf`.
struct Header {
  LogIndex applied_index;
  Term applied_term;
  Revision revision;
  std::uint64_t cluster_id = 0;
  std::int64_t created_unix_ms = 0;  // informational
  Membership conf;
  std::uint32_t file_count = 0;  // how many file entries follow the header

  friend bool operator==(const Header&, const Header&) = default;
};

// magic | version | body length | body | CRC-32C(body).
[[nodiscard]] std::string EncodeHeader(const Header& header);

// Decodes the header at the start of a payload, `bytes` (what follows the header is ignored), and
// sets *header_bytes to its length. Checks, in this order, and names the first failure: magic
// (InvalidArgument: not an Epoch snapshot), version (InvalidArgument), body length, header CRC
// and fields (Corruption). Messages start with `path`.
[[nodiscard]] Result<Header> DecodeHeader(std::string_view bytes, std::string_view path,
                                          std::size_t* header_bytes);

// The start of a file entry: u16 name length | name | u64 size. The `size` content bytes and
// their CRC-32C (u32) follow.
[[nodiscard]] std::string EncodeFileEntryPrefix(std::string_view name, std::uint64_t size);

// A file name the snapshot formats accept: non-empty, at most 255 bytes, no '/' or NUL, not "."
// or "..".
[[nodiscard]] bool IsSafeFileName(std::string_view name);

// The zero bytes that bring a payload of `payload_bytes` to a multiple of kAlign.
[[nodiscard]] constexpr std::uint64_t PaddingFor(std::uint64_t payload_bytes) {
  return (kAlign - payload_bytes % kAlign) % kAlign;
}

// etcdctl's rule (clientv3/snapshot `hasChecksum`): a payload padded to 512 bytes, at least one
// block of it, plus the 32-byte trailer. Corruption ("truncated or not a snapshot") otherwise.
[[nodiscard]] Status CheckFileSize(std::string_view path, std::uint64_t file_bytes);

// Incremental SHA-256 (OpenSSL EVP).
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(std::string_view data);
  [[nodiscard]] std::array<unsigned char, kTrailerBytes> Finish();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// Reads exactly n bytes at `offset` of the file being checked into `out`; an error is final.
using ReadAt = std::function<Status(std::uint64_t offset, char* out, std::size_t n)>;

// A file whose trailer and header verified.
struct VerifiedHead {
  Header header;
  std::uint64_t header_bytes = 0;   // the first file entry starts here
  std::uint64_t payload_bytes = 0;  // the file's size less the trailer
  std::array<unsigned char, kTrailerBytes> sha256{};
};

// Checks a file of `file_bytes` bytes, read through `read_at`, in this order and names the first
// failure: the size rule, the SHA-256 trailer (the payload is read once, in pieces of 1 MiB;
// Corruption "SHA-256 checksum mismatch"), then the header (DecodeHeader). The file entries after
// the header are not read.
[[nodiscard]] Result<VerifiedHead> VerifyTrailerAndHeader(std::string_view path,
                                                          std::uint64_t file_bytes,
                                                          const ReadAt& read_at);

// What ReadEntries hands out, file by file in archive order. Every callback may be empty; an
// error it returns stops the walk and is returned as is.
struct EntryVisitor {
  // A file entry starts: its name (IsSafeFileName holds) and the size of its content.
  std::function<Status(std::string_view name, std::uint64_t size)> begin_file;
  // The next piece of the current file's content, which starts at `offset` within the file.
  // Pieces arrive in order, at most 1 MiB each, before the file's CRC-32C is checked.
  std::function<Status(std::uint64_t offset, std::string_view data)> file_data;
  // The current file's content matched its CRC-32C.
  std::function<Status()> end_file;
};

// Walks what follows the header of a file VerifyTrailerAndHeader accepted: the header's
// file_count file entries, the end marker and the zero padding (server/SNAPSHOT.md §1). Checks, in
// this order, and names the first failure (Corruption, messages start with `path`): each entry's
// name, its size against the bytes left, its CRC-32C ("checksum mismatch in file X"), the end
// marker, then the padding. Files are read in pieces of 1 MiB.
[[nodiscard]] Status ReadEntries(std::string_view path, const VerifiedHead& head,
                                 const ReadAt& read_at, const EntryVisitor& visitor);

}  // namespace epoch::snapshot_format
