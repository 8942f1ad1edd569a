// The snapshot archive (server/SNAPSHOT.md §1): round trips, the etcdctl size rule, and a clear
// error for each way a file can be damaged; restore mode on a real KvStore checkpoint.
#include "epoch/snapshot/snapshot_archive.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using namespace snapshot_testing;

ArchiveHeader SampleHeader() {
  ArchiveHeader h;
  h.applied_index = LogIndex(1234);
  h.applied_term = Term(7);
  h.revision = Revision(99);
  h.cluster_id = 0xabcdef;
  h.created_unix_ms = 1'700'000'000'000;
  h.conf.voters = {NodeId(1), NodeId(2), NodeId(3)};
  h.conf.learners = {NodeId(9)};
  return h;
}

std::string Sha256(std::string_view data) {
  unsigned char out[32];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<char*>(out), n);
}

// Replaces the trailer with the SHA-256 of the (modified) payload: damage only the structure
// can reveal.
std::string Reseal(std::string archive) {
  archive.resize(archive.size() - 32);
  return archive + Sha256(archive);
}

struct Fixture {
  TempDir tmp;
  std::map<std::string, std::string> files = MakeFiles(tmp.Sub("ckpt"), 42);
  std::string archive_path = tmp.Sub("snap.db");

  Fixture() {
    auto listed = ListCheckpointFiles(tmp.Sub("ckpt"));
    REQUIRE(listed.ok());
    REQUIRE(WriteArchiveFile(SampleHeader(), *listed, archive_path).ok());
  }
};

}  // namespace

TEST_CASE("archive round trip: header and every file come back byte for byte", "[snapshot]") {
  Fixture f;
  const std::string archive = ReadFile(f.archive_path);
  // etcdctl snapshot save accepts the file only if size % 512 == 32 (payload + SHA-256).
  CHECK(archive.size() % 512 == 32);
  CHECK(archive.substr(archive.size() - 32) == Sha256(archive.substr(0, archive.size() - 32)));

  auto verified = VerifyArchive(f.archive_path);
  REQUIRE(verified.ok());
  ArchiveHeader expected = SampleHeader();
  expected.file_count = static_cast<std::uint32_t>(f.files.size());
  CHECK(*verified == expected);

  auto unpacked = UnpackArchive(f.archive_path, f.tmp.Sub("out"));
  REQUIRE(unpacked.ok());
  CHECK(*unpacked == expected);
  CHECK(DirContents(f.tmp.Sub("out")) == f.files);
}

TEST_CASE("archive writer: any piece size gives the same bytes and the announced total",
          "[snapshot]") {
  Fixture f;
  const std::string whole = ReadFile(f.archive_path);
  auto listed = ListCheckpointFiles(f.tmp.Sub("ckpt"));
  REQUIRE(listed.ok());
  for (std::size_t piece : {std::size_t{13}, std::size_t{511}, std::size_t{65536}}) {
    ArchiveWriter writer(SampleHeader(), *listed);
    CHECK(writer.TotalBytes() == whole.size());
    std::string streamed;
    bool sizes_ok = true;
    // Bounded: at most TotalBytes() pieces of at least one byte.
    for (std::uint64_t i = 0; i <= writer.TotalBytes() && !writer.Done(); ++i) {
      auto next = writer.Next(piece);
      REQUIRE(next.ok());
      sizes_ok = sizes_ok && !next->empty() && next->size() <= piece;
      streamed += *next;
      CHECK(writer.BytesProduced() == streamed.size());
    }
    CHECK(sizes_ok);
    CHECK(writer.Done());
    CHECK(writer.Next(piece)->empty());
    CHECK(streamed == whole);
  }
}

TEST_CASE("archive of an empty checkpoint directory is still a valid etcdctl-sized file",
          "[snapshot]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.Sub("empty"));
  REQUIRE(WriteArchiveFile(SampleHeader(), {}, tmp.Sub("s.db")).ok());
  CHECK(ReadFile(tmp.Sub("s.db")).size() % 512 == 32);
  auto unpacked = UnpackArchive(tmp.Sub("s.db"), tmp.Sub("out"));
  REQUIRE(unpacked.ok());
  CHECK(unpacked->file_count == 0);
}

TEST_CASE("archive: truncated files are refused with a clear message", "[snapshot]") {
  Fixture f;
  const std::string archive = ReadFile(f.archive_path);
  SECTION("cut at an arbitrary point: the size rule fails") {
    WriteFile(f.archive_path, archive.substr(0, archive.size() - 100));
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK(r.status().Is(StatusCode::kCorruption));
    CHECK_THAT(r.status().message(), Catch::Contains("truncated or not a snapshot"));
  }
  SECTION("cut by exactly 512 bytes: the size rule holds, the SHA-256 does not") {
    WriteFile(f.archive_path,
              archive.substr(0, archive.size() - 544) + archive.substr(archive.size() - 32));
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("SHA-256 checksum mismatch"));
  }
  SECTION("empty file") {
    WriteFile(f.archive_path, "");
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("truncated or not a snapshot"));
  }
}

TEST_CASE("archive: corrupted files are refused and nothing is unpacked", "[snapshot]") {
  Fixture f;
  std::string archive = ReadFile(f.archive_path);
  SECTION("one flipped bit anywhere fails the SHA-256") {
    for (std::size_t at : {std::size_t{0}, std::size_t{40}, archive.size() / 2, archive.size() - 33,
                           archive.size() - 1}) {
      std::string bad = archive;
      bad[at] = static_cast<char>(bad[at] ^ 0x10);
      WriteFile(f.archive_path, bad);
      auto r = UnpackArchive(f.archive_path, f.tmp.Sub("out"));
      INFO("flipped byte " << at);
      REQUIRE(!r.ok());
      CHECK_THAT(r.status().message(), Catch::Contains("SHA-256 checksum mismatch"));
      CHECK(!std::filesystem::exists(f.tmp.Sub("out")));
    }
  }
  SECTION("a damaged file body behind a matching SHA-256 fails that file's CRC-32C") {
    const std::size_t at = archive.find(f.files.at("MANIFEST-000005").substr(0, 64));
    REQUIRE(at != std::string::npos);
    archive[at + 10] = static_cast<char>(archive[at + 10] ^ 1);
    WriteFile(f.archive_path, Reseal(archive));
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("checksum mismatch in file MANIFEST-000005"));
  }
  SECTION("another format behind a matching SHA-256 (e.g. etcd's bbolt file) is named as such") {
    WriteFile(f.archive_path, Reseal(std::string(1024 + 32, 'x')));
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK(r.status().Is(StatusCode::kInvalidArgument));
    CHECK_THAT(r.status().message(), Catch::Contains("is not an Epoch snapshot"));
  }
  SECTION("non-zero padding behind a matching SHA-256") {
    REQUIRE(archive[archive.size() - 33] == '\0');  // these files leave some padding
    archive[archive.size() - 33] = 'p';
    WriteFile(f.archive_path, Reseal(archive));
    auto r = VerifyArchive(f.archive_path);
    REQUIRE(!r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("non-zero padding"));
  }
}

TEST_CASE("archive: unpack refuses a non-empty destination", "[snapshot]") {
  Fixture f;
  std::filesystem::create_directories(f.tmp.Sub("out"));
  WriteFile(f.tmp.Sub("out/keep"), "x");
  auto r = UnpackArchive(f.archive_path, f.tmp.Sub("out"));
  REQUIRE(!r.ok());
  CHECK(r.status().Is(StatusCode::kFailedPrecondition));
  CHECK(ReadFile(f.tmp.Sub("out/keep")) == "x");
}

}  // namespace epoch::server
