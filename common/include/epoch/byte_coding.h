// Big-endian fixed-width integers, the byte order of every Epoch format that is not the WAL: the
// RocksDB keys (so that bytewise order is numeric order), the peer frames and hello, the snapshot
// archive (docs/formats.md).
//
// Reads do not check bounds: the caller has made sure `bytes` bytes are there.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace epoch {

// Appends the low `bytes` bytes of v (1 to 8), most significant first.
inline void PutBigEndian(std::string* out, std::uint64_t v, int bytes) {
  char buf[8];
  for (int i = bytes - 1; i >= 0; --i) {
    buf[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  out->append(buf, static_cast<std::size_t>(bytes));
}
inline void PutBigEndian16(std::string* out, std::uint16_t v) { PutBigEndian(out, v, 2); }
inline void PutBigEndian32(std::string* out, std::uint32_t v) { PutBigEndian(out, v, 4); }
inline void PutBigEndian64(std::string* out, std::uint64_t v) { PutBigEndian(out, v, 8); }

// The big-endian integer in in[0, bytes) (1 to 8 bytes).
[[nodiscard]] constexpr std::uint64_t GetBigEndian(const char* in, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
[[nodiscard]] constexpr std::uint32_t GetBigEndian32(const char* in) {
  return static_cast<std::uint32_t>(GetBigEndian(in, 4));
}
[[nodiscard]] constexpr std::uint64_t GetBigEndian64(const char* in) { return GetBigEndian(in, 8); }

}  // namespace epoch
