// Big-endian fixed-width integers: the byte order on the wire and on disk, round trips.
#include "epoch/byte_coding.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

namespace epoch {
namespace {

TEST_CASE("big-endian puts write the most significant byte first", "[common]") {
  std::string out;
  PutBigEndian16(&out, 0x0102);
  PutBigEndian32(&out, 0x03040506u);
  PutBigEndian64(&out, 0x0708090a0b0c0d0eULL);
  PutBigEndian(&out, 0xffeeddULL, 3);
  CHECK(out ==
        std::string("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\xff\xee\xdd", 17));
}

TEST_CASE("big-endian gets invert the puts at every width", "[common]") {
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0x80},
                          std::uint64_t{0xdeadbeef}, ~std::uint64_t{0}}) {
    for (int bytes = 1; bytes <= 8; ++bytes) {
      const std::uint64_t kept = bytes == 8 ? v : v & ((std::uint64_t{1} << (8 * bytes)) - 1);
      std::string out;
      PutBigEndian(&out, v, bytes);
      REQUIRE(out.size() == static_cast<std::size_t>(bytes));
      CHECK(GetBigEndian(out.data(), bytes) == kept);
    }
    std::string out;
    PutBigEndian32(&out, static_cast<std::uint32_t>(v));
    PutBigEndian64(&out, v);
    CHECK(GetBigEndian32(out.data()) == static_cast<std::uint32_t>(v));
    CHECK(GetBigEndian64(out.data() + 4) == v);
  }
}

TEST_CASE("big-endian encoding orders bytewise as the numbers do", "[common]") {
  std::string a, b;
  PutBigEndian64(&a, 255);
  PutBigEndian64(&b, 256);
  CHECK(a < b);
}

}  // namespace
}  // namespace epoch
