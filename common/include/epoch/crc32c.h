// CRC32C (Castagnoli): the WAL's frame and record checksums (masked, wal/FORMAT.md §8), the
// snapshot archive's header and file checksums and the snapshot chunks' (unmasked,
// server/SNAPSHOT.md).
// Uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time) and a portable
// slicing-by-8 table otherwise; both give identical results (crc32c_test.cc checks them against
// each other and against the RFC 3720 vectors).
//
// Thread-safety: pure functions, callable from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace epoch::crc32c {

// Returns the CRC32C of A ++ data, given crc = CRC32C(A). Extend(0, ...) starts a new CRC.
[[nodiscard]] std::uint32_t Extend(std::uint32_t crc, const char* data, std::size_t n);
[[nodiscard]] inline std::uint32_t Value(const char* data, std::size_t n) {
  return Extend(0, data, n);
}
[[nodiscard]] inline std::uint32_t Value(std::string_view s) { return Value(s.data(), s.size()); }

// The two implementations, exposed for tests and the benchmark.
[[nodiscard]] std::uint32_t ExtendPortable(std::uint32_t crc, const char* data, std::size_t n);
[[nodiscard]] std::uint32_t ExtendHardware(std::uint32_t crc, const char* data, std::size_t n);
[[nodiscard]] bool HardwareAvailable();

// Stored CRCs are masked (as in LevelDB) so that computing the CRC of bytes that contain embedded
// CRCs does not degenerate.
inline constexpr std::uint32_t kMaskDelta = 0xa282ead8u;
[[nodiscard]] constexpr std::uint32_t Mask(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}
[[nodiscard]] constexpr std::uint32_t Unmask(std::uint32_t masked) {
  const std::uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace epoch::crc32c
