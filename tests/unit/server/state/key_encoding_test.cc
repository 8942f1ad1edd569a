// The stored key layout: escaped user keys must sort exactly like the user keys and never be a
// prefix of one another, or historical range scans would return wrong keys.
#include "key_encoding.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "revision_codec.h"

namespace epoch::server {
namespace {

std::string RandomKey(std::mt19937_64& rng) {
  // Small alphabet rich in the bytes that need escaping (0x00, 0x01, 0xff).
  static const char kBytes[] = {'\x00', '\x01', '\xff', 'a', 'b'};
  std::string k;
  const int len = static_cast<int>(rng() % 5);
  for (int i = 0; i < len; ++i) k.push_back(kBytes[rng() % sizeof(kBytes)]);
  return k;
}

TEST_CASE("escaped index keys sort like user keys, then by revision", "[server][encoding]") {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::string a = RandomKey(rng);
    const std::string b = RandomKey(rng);
    const RevisionPair ra{static_cast<std::int64_t>(rng() % 300),
                          static_cast<std::int64_t>(rng() % 3)};
    const RevisionPair rb{static_cast<std::int64_t>(rng() % 300),
                          static_cast<std::int64_t>(rng() % 3)};
    const std::string ea = IndexKey(a, ra);
    const std::string eb = IndexKey(b, rb);
    INFO("a=" << a.size() << " bytes, b=" << b.size() << " bytes");
    if (a != b) {
      CHECK((a < b) == (ea < eb));
    } else {
      CHECK((ra < rb) == (ea < eb));
    }
  }
}

TEST_CASE("index keys parse back to user key and revision", "[server][encoding]") {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 500; ++i) {
    const std::string k = RandomKey(rng);
    const RevisionPair r{static_cast<std::int64_t>(rng() % 100000),
                         static_cast<std::int64_t>(rng() % 7)};
    std::string parsed;
    RevisionPair pr;
    REQUIRE(ParseIndexKey(IndexKey(k, r), &parsed, &pr));
    CHECK(parsed == k);
    CHECK(pr == r);
  }
  std::string k;
  RevisionPair r;
  CHECK_FALSE(ParseIndexKey("i\x00", &k, &r));
  CHECK_FALSE(ParseIndexKey("x", &k, &r));
}

TEST_CASE("MakeKeyRange follows etcd's range_end rules", "[server][encoding]") {
  CHECK(MakeKeyRange("a", "").kind == KeyRange::Kind::kSingle);
  CHECK(MakeKeyRange("a", std::string(1, '\0')).kind == KeyRange::Kind::kFromKey);
  const KeyRange r = MakeKeyRange("a", "c");
  CHECK(r.kind == KeyRange::Kind::kRange);
  CHECK(r.Contains("a"));
  CHECK(r.Contains("bzz"));
  CHECK_FALSE(r.Contains("c"));
  CHECK(MakeKeyRange("b", std::string(1, '\0')).Contains("zzz"));
  CHECK_FALSE(MakeKeyRange("b", std::string(1, '\0')).Contains("a"));
}

TEST_CASE("PrefixEnd increments the last non-0xff byte and truncates", "[server][encoding]") {
  CHECK(PrefixEnd("abc") == "abd");
  CHECK(PrefixEnd(std::string("a\xff", 2)) == "b");
  CHECK(PrefixEnd(std::string("\xff\xff", 2)).empty());
  CHECK(PrefixEnd("").empty());
}

TEST_CASE("revision keys are big-endian so bytewise order is numeric", "[server][encoding]") {
  CHECK(RevisionKey({255, 0}) < RevisionKey({256, 0}));
  CHECK(RevisionKey({256, 9}) < RevisionKey({257, 0}));
  RevisionPair r;
  REQUIRE(ParseRevisionKey(RevisionKey({123456789, 3}), &r));
  CHECK(r == RevisionPair{123456789, 3});
  std::int64_t v = 0;
  REQUIRE(DecodeInt64(EncodeInt64(-1), &v));
  CHECK(v == -1);
}

}  // namespace
}  // namespace epoch::server
