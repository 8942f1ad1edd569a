// Revision codec: (main, sub) revision pairs and int64 meta values, big-endian
// (epoch/byte_coding.h) so that RocksDB's bytewise order equals numeric order. Used by key_encoding
// and everything that builds or parses stored keys.
//
// Thread-safety: pure functions.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace epoch::server {

// One write's position in history: `main` is the store revision of the Put/DeleteRange/Txn;
// `sub` orders the writes inside it (0, 1, ... within one txn), as in etcd's revision{main, sub}.
// Both are non-negative.
struct RevisionPair {
  std::int64_t main = 0;
  std::int64_t sub = 0;

  friend auto operator<=>(const RevisionPair&, const RevisionPair&) = default;
};

inline constexpr std::size_t kRevisionPairBytes = 16;

void AppendRevisionPair(std::string* out, RevisionPair rev);
// Decodes 16 bytes; false if `in` is shorter.
bool DecodeRevisionPair(std::string_view in, RevisionPair* rev);

// Meta values: an int64 stored as 8 big-endian bytes.
std::string EncodeInt64(std::int64_t v);
bool DecodeInt64(std::string_view in, std::int64_t* v);

}  // namespace epoch::server
