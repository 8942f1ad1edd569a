// CRC32C: known vectors (RFC 3720 B.4), hardware == portable, masking.
#include "epoch/crc32c.h"

#include <catch2/catch.hpp>
#include <random>
#include <string>

namespace crc32c = epoch::crc32c;

TEST_CASE("crc32c matches the RFC 3720 test vectors", "[common][crc]") {
  const std::string zeros(32, '\0');
  const std::string ones(32, '\xff');
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  for (auto fn : {crc32c::ExtendPortable, crc32c::ExtendHardware, crc32c::Extend}) {
    CHECK(fn(0, zeros.data(), zeros.size()) == 0x8a9136aau);
    CHECK(fn(0, ones.data(), ones.size()) == 0x62a8ab43u);
    CHECK(fn(0, ascending.data(), ascending.size()) == 0x46dd794eu);
    CHECK(fn(0, descending.data(), descending.size()) == 0x113fdb5cu);
    CHECK(fn(0, "123456789", 9) == 0xe3069283u);
  }
}

TEST_CASE("crc32c hardware and portable paths agree at every length and alignment",
          "[common][crc]") {
  INFO("hardware available: " << crc32c::HardwareAvailable());
  std::mt19937_64 rng(7);
  std::string buf(4096 + 16, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t len : {0, 1, 7, 8, 9, 15, 16, 63, 64, 65, 1000, 4096}) {
      const std::uint32_t a = crc32c::ExtendPortable(0, buf.data() + align, len);
      const std::uint32_t b = crc32c::ExtendHardware(0, buf.data() + align, len);
      REQUIRE(a == b);
    }
  }
}

TEST_CASE("crc32c Extend composes and Mask round-trips", "[common][crc]") {
  const std::string s = "hello, write-ahead log";
  const std::uint32_t whole = crc32c::Value(s);
  const std::uint32_t split =
      crc32c::Extend(crc32c::Value(s.data(), 5), s.data() + 5, s.size() - 5);
  CHECK(whole == split);
  CHECK(crc32c::Mask(whole) != whole);
  CHECK(crc32c::Unmask(crc32c::Mask(whole)) == whole);
  CHECK(crc32c::Unmask(crc32c::Mask(0)) == 0u);
}
