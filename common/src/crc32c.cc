// CRC32C: slicing-by-8 table fallback and the SSE4.2 path (see crc32c.h).
#include "epoch/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace epoch::crc32c {
namespace {

constexpr std::uint32_t kPolyReflected = 0x82f63b78u;

using Tables = std::array<std::array<std::uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolyReflected : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t i = 0; i < 256; ++i) {
    for (std::size_t s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

std::uint64_t LoadLe64(const char* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;  // x86-64 and every target we build for are little-endian
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t ExtendSse42(std::uint32_t crc, const char* data,
                                                            std::size_t n) {
  std::uint64_t c = ~crc;
  while (n > 0 && (reinterpret_cast<std::uintptr_t>(data) & 7) != 0) {
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), static_cast<std::uint8_t>(*data++));
    --n;
  }
  while (n >= 8) {
    c = _mm_crc32_u64(c, LoadLe64(data));
    data += 8;
    n -= 8;
  }
  while (n > 0) {
    c = _mm_crc32_u8(static_cast<std::uint32_t>(c), static_cast<std::uint8_t>(*data++));
    --n;
  }
  return ~static_cast<std::uint32_t>(c);
}
#endif

bool DetectHardware() {
#if defined(__x86_64__)
  return __builtin_cpu_supports("sse4.2");
#else
  return false;
#endif
}

const bool kHardware = DetectHardware();

}  // namespace

std::uint32_t ExtendPortable(std::uint32_t crc, const char* data, std::size_t n) {
  std::uint32_t c = ~crc;
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  while (n >= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    word ^= c;
    c = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^ kTables[5][(word >> 16) & 0xff] ^
        kTables[4][(word >> 24) & 0xff] ^ kTables[3][(word >> 32) & 0xff] ^
        kTables[2][(word >> 40) & 0xff] ^ kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
    --n;
  }
  return ~c;
}

std::uint32_t ExtendHardware(std::uint32_t crc, const char* data, std::size_t n) {
#if defined(__x86_64__)
  if (kHardware) return ExtendSse42(crc, data, n);
#endif
  return ExtendPortable(crc, data, n);
}

bool HardwareAvailable() { return kHardware; }

std::uint32_t Extend(std::uint32_t crc, const char* data, std::size_t n) {
  return kHardware ? ExtendHardware(crc, data, n) : ExtendPortable(crc, data, n);
}

}  // namespace epoch::crc32c
