// The snapshot archive format library (server/SNAPSHOT.md §1): the header's exact bytes, round
// trips, a clear error for each way a header can be truncated or damaged, and the whole-file check
// (size rule, SHA-256 trailer, header) over an in-memory file.
#include "epoch/snapshot_format/snapshot_format.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"

namespace epoch::snapshot_format {
namespace {

// Full-width values: a cluster id with the top bit set, a created time before the epoch.
Header SampleHeader() {
  Header h;
  h.applied_index = LogIndex(1234);
  h.applied_term = Term(7);
  h.revision = Revision(99);
  h.cluster_id = 0xfedcba9876543210;
  h.created_unix_ms = -1;
  h.conf.voters = {NodeId(1), NodeId(2), NodeId(3)};
  h.conf.learners = {NodeId(9), NodeId(10)};
  h.file_count = 1;
  return h;
}

// SampleHeader() as SNAPSHOT.md lays it out, computed outside this code base: magic, version 1,
// body length 92, applied index, term, revision, cluster id, created, 3 voters, 2 learners,
// 1 file, CRC-32C of the body.
constexpr std::string_view kSampleHeaderHex =
    "45504f4348534e50000000010000005c00000000000004d20000000000000007"
    "0000000000000063fedcba9876543210ffffffffffffffff0000000300000000"
    "0000000100000000000000020000000000000003000000020000000000000009"
    "000000000000000a0000000178560d6b";

std::string Hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back("0123456789abcdef"[c >> 4]);
    out.push_back("0123456789abcdef"[c & 15]);
  }
  return out;
}

// A header with `body` (any bytes) and a matching CRC.
std::string HeaderWithBody(std::string_view body) {
  std::string out(kMagic);
  PutBigEndian32(&out, kVersion);
  PutBigEndian32(&out, static_cast<std::uint32_t>(body.size()));
  out += body;
  PutBigEndian32(&out, crc32c::Value(body));
  return out;
}

std::string Sha256Of(std::string_view data) {
  Sha256 sha;
  sha.Update(data);
  auto digest = sha.Finish();
  return std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

// A whole archive holding one file "a" with content "abc".
std::string Archive(const std::string& header) {
  std::string payload = header + EncodeFileEntryPrefix("a", 3) + "abc";
  PutBigEndian32(&payload, crc32c::Value("abc"));
  payload += kEndMarker;
  payload += std::string(PaddingFor(payload.size()), '\0');
  return payload + Sha256Of(payload);
}

// Replaces the trailer with the SHA-256 of the (modified) payload.
std::string Reseal(std::string archive) {
  archive.resize(archive.size() - kTrailerBytes);
  return archive + Sha256Of(archive);
}

ReadAt InMemory(const std::string& file) {
  return [&file](std::uint64_t offset, char* out, std::size_t n) {
    if (offset > file.size() || n > file.size() - offset) return Status::IOError("short read");
    std::memcpy(out, file.data() + offset, n);
    return Status::Ok();
  };
}

Result<Header> Decode(std::string_view bytes, std::size_t* size = nullptr) {
  std::size_t unused = 0;
  return DecodeHeader(bytes, "snap.db", size != nullptr ? size : &unused);
}

}  // namespace

TEST_CASE("snapshot format: the header's bytes are SNAPSHOT.md's layout", "[snapshot_format]") {
  CHECK(Hex(EncodeHeader(SampleHeader())) == kSampleHeaderHex);
  std::string prefix = EncodeFileEntryPrefix("MANIFEST-000005", 300);
  CHECK(prefix == std::string("\x00\x0f", 2) + "MANIFEST-000005" +
                      std::string("\x00\x00\x00\x00\x00\x00\x01\x2c", 8));
}

TEST_CASE("snapshot format: header round trip, whatever follows it", "[snapshot_format]") {
  for (const Header& h : {SampleHeader(), Header{}}) {
    const std::string encoded = EncodeHeader(h);
    std::size_t size = 0;
    Result<Header> decoded = Decode(encoded + "EPOCHEND and more", &size);
    REQUIRE(decoded.ok());
    CHECK(*decoded == h);
    CHECK(size == encoded.size());
  }
}

TEST_CASE("snapshot format: a truncated header is refused with a clear message",
          "[snapshot_format]") {
  const std::string encoded = EncodeHeader(SampleHeader());
  for (std::size_t len = 0; len < encoded.size(); ++len) {
    Result<Header> r = Decode(encoded.substr(0, len));
    INFO("header cut to " << len << " bytes");
    REQUIRE(!r.ok());
    CHECK(r.status().Is(StatusCode::kCorruption));
    CHECK_THAT(r.status().message(), Catch::Contains("runs past the end of the payload"));
  }
}

TEST_CASE("snapshot format: a damaged header is refused with a clear message",
          "[snapshot_format]") {
  const std::string encoded = EncodeHeader(SampleHeader());
  SECTION("another format") {
    Result<Header> r = Decode("SQLite format 3" + encoded);
    REQUIRE(!r.ok());
    CHECK(r.status().Is(StatusCode::kInvalidArgument));
    CHECK_THAT(r.status().message(), Catch::Contains("snap.db is not an Epoch snapshot"));
  }
  SECTION("another version") {
    std::string bad = encoded;
    bad[11] = 2;
    Result<Header> r = Decode(bad);
    REQUIRE(!r.ok());
    CHECK(r.status().Is(StatusCode::kInvalidArgument));
    CHECK_THAT(r.status().message(), Catch::Contains("version 2 is not supported"));
  }
  SECTION("a body length over 1 MiB") {
    std::string bad = encoded;
    bad[12] = 1;
    Result<Header> r = Decode(bad);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("header length 16777308 is too large"));
  }
  SECTION("a flipped bit in the body or its CRC") {
    for (std::size_t at : {std::size_t{16}, std::size_t{40}, encoded.size() - 1}) {
      std::string bad = encoded;
      bad[at] = static_cast<char>(bad[at] ^ 0x04);
      Result<Header> r = Decode(bad);
      INFO("flipped byte " << at);
      REQUIRE(!r.ok());
      CHECK(r.status().Is(StatusCode::kCorruption));
      CHECK_THAT(r.status().message(), Catch::Contains("header checksum mismatch"));
    }
  }
  SECTION("fields that do not fit the body, behind a matching CRC") {
    const std::string body = encoded.substr(16, encoded.size() - 20);
    std::string too_many = body.substr(0, 40);
    PutBigEndian32(&too_many, kMaxMembers + 1);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {body.substr(0, 39), "too short"},
        {too_many, "member count"},
        {body.substr(0, 48), "member list"},
        {body.substr(0, body.size() - 1), "file count"},
        {body + "x", "trailing bytes"}};
    for (const auto& [bad_body, what] : cases) {
      Result<Header> r = Decode(HeaderWithBody(bad_body));
      INFO(what);
      REQUIRE(!r.ok());
      CHECK(r.status().Is(StatusCode::kCorruption));
      CHECK_THAT(r.status().message(), Catch::Contains("malformed snapshot header (" + what + ")"));
    }
  }
}

TEST_CASE("snapshot format: size rule, padding and file names", "[snapshot_format]") {
  CHECK(PaddingFor(0) == 0);
  CHECK(PaddingFor(1) == 511);
  CHECK(PaddingFor(512) == 0);
  CHECK(PaddingFor(1000) == 24);
  CHECK(CheckFileSize("f", 544).ok());
  CHECK(CheckFileSize("f", 1056).ok());
  for (std::uint64_t bad : {0, 32, 512, 543, 545, 1024}) {
    Status s = CheckFileSize("f", bad);
    INFO("size " << bad);
    CHECK(s.Is(StatusCode::kCorruption));
    CHECK_THAT(s.message(), Catch::Contains("truncated or not a snapshot"));
  }
  CHECK(IsSafeFileName("000012.sst"));
  CHECK(IsSafeFileName(std::string(255, 'a')));
  for (const std::string& bad : std::vector<std::string>{
           "", ".", "..", "a/b", std::string(256, 'a'), std::string("a\0b", 3)}) {
    CHECK(!IsSafeFileName(bad));
  }
}

TEST_CASE("snapshot format: a whole file's trailer and header", "[snapshot_format]") {
  const Header h = SampleHeader();
  const std::string encoded = EncodeHeader(h);
  const std::string file = Archive(encoded);
  REQUIRE(file.size() == 512 + 32);  // the header, one small file entry, the end marker

  SECTION("a good file") {
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", file.size(), InMemory(file));
    REQUIRE(head.ok());
    CHECK(head->header == h);
    CHECK(head->header_bytes == encoded.size());
    CHECK(head->payload_bytes == 512);
    CHECK(std::string(reinterpret_cast<const char*>(head->sha256.data()), 32) == file.substr(512));
  }
  SECTION("cut short: the size rule") {
    const std::string cut = file.substr(0, 300);
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", cut.size(), InMemory(cut));
    REQUIRE(!head.ok());
    CHECK_THAT(head.status().message(), Catch::Contains("truncated or not a snapshot"));
  }
  SECTION("a flipped byte in the header: the SHA-256") {
    std::string bad = file;
    bad[20] ^= 1;
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", bad.size(), InMemory(bad));
    REQUIRE(!head.ok());
    CHECK(head.status().Is(StatusCode::kCorruption));
    CHECK_THAT(head.status().message(), Catch::Contains("SHA-256 checksum mismatch"));
  }
  SECTION("a damaged header behind a matching SHA-256: the header CRC") {
    std::string bad = file;
    bad[20] ^= 1;
    bad = Reseal(bad);
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", bad.size(), InMemory(bad));
    REQUIRE(!head.ok());
    CHECK_THAT(head.status().message(), Catch::Contains("header checksum mismatch"));
  }
  SECTION("another format behind a matching SHA-256") {
    const std::string other = Reseal(std::string(1024 + 32, 'x'));
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", other.size(), InMemory(other));
    REQUIRE(!head.ok());
    CHECK(head.status().Is(StatusCode::kInvalidArgument));
    CHECK_THAT(head.status().message(), Catch::Contains("is not an Epoch snapshot"));
  }
  SECTION("a header longer than the payload, behind a matching SHA-256") {
    std::string bad = file;
    bad[14] = 0x10;  // body length 4188, past the 512-byte payload
    bad = Reseal(bad);
    Result<VerifiedHead> head = VerifyTrailerAndHeader("snap.db", bad.size(), InMemory(bad));
    REQUIRE(!head.ok());
    CHECK_THAT(head.status().message(), Catch::Contains("header at offset 16 runs past the end"));
  }
  SECTION("a read error is passed on") {
    Result<VerifiedHead> head = VerifyTrailerAndHeader(
        "snap.db", file.size(),
        [](std::uint64_t, char*, std::size_t) { return Status::IOError("disk on fire"); });
    REQUIRE(!head.ok());
    CHECK(head.status().message() == "disk on fire");
  }
}

}  // namespace epoch::snapshot_format
