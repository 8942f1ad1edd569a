// `snapshot status`'s key count (snapshot_file.h): an archive of a real RocksDB image, made with
// the format library epochd's writer uses, is unpacked and its records counted in every column
// family; a damaged file entry is refused with the format's message.
#include <rocksdb/db.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "epoch/byte_coding.h"
#include "epoch/crc32c.h"
#include "epoch/snapshot_format/snapshot_format.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "snapshot_file.h"

namespace epoch::ctl {
namespace {

namespace format = snapshot_format;

// A RocksDB database in `dir` with `default_keys` records in the default family and
// `history_keys` in a second one, flushed and closed.
void MakeImage(const std::string& dir, int default_keys, int history_keys) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
      {"history", rocksdb::ColumnFamilyOptions()}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  REQUIRE(rocksdb::DB::Open(options, dir, families, &handles, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (int i = 0; i < default_keys; ++i) {
    REQUIRE(db->Put(rocksdb::WriteOptions(), handles[0], "k" + std::to_string(i), "v").ok());
  }
  for (int i = 0; i < history_keys; ++i) {
    REQUIRE(db->Put(rocksdb::WriteOptions(), handles[1], "r" + std::to_string(i), "e").ok());
  }
  REQUIRE(db->Put(rocksdb::WriteOptions(), handles[0], "k0", "overwritten").ok());
  REQUIRE(db->Flush(rocksdb::FlushOptions(), handles).ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) REQUIRE(db->DestroyColumnFamilyHandle(h).ok());
}

// The archive of every file in `dir` (server/SNAPSHOT.md §1).
std::string ArchiveOf(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  format::Header header;
  header.applied_index = LogIndex(9);
  header.revision = Revision(5);
  header.file_count = static_cast<std::uint32_t>(files.size());
  std::string payload = format::EncodeHeader(header);
  for (const auto& path : files) {
    const std::string content = test_support::ReadFile(path);
    payload += format::EncodeFileEntryPrefix(path.filename().string(), content.size());
    payload += content;
    PutBigEndian32(&payload, crc32c::Value(content));
  }
  payload += format::kEndMarker;
  payload += std::string(format::PaddingFor(payload.size()), '\0');
  format::Sha256 sha;
  sha.Update(payload);
  const auto digest = sha.Finish();
  return payload + std::string(reinterpret_cast<const char*>(digest.data()), digest.size());
}

TEST_CASE("snapshot status: the records of every column family of the image", "[ctl]") {
  test_support::TempDir dir("epoch-ctl-status");
  MakeImage(dir.Sub("image"), 7, 4);
  const std::string archive = ArchiveOf(dir.Sub("image"));
  test_support::WriteFile(dir.Sub("snap.db"), archive);

  Result<SnapshotInfo> info = ReadSnapshotStatus(dir.Sub("snap.db"));
  REQUIRE(info.ok());
  CHECK(info->total_keys == std::optional<std::uint64_t>(11));
  CHECK(info->revision == 5);
  CHECK(info->total_bytes == archive.size());
  CHECK(info->Hash32() == std::stoul(info->sha256_hex.substr(0, 8), nullptr, 16));
  // The header alone does not count.
  CHECK_FALSE(ReadSnapshotInfo(dir.Sub("snap.db"))->total_keys.has_value());

  // A file whose content does not match its CRC-32C (trailer recomputed so that only the entry
  // check can catch it).
  std::string payload = archive.substr(0, archive.size() - format::kTrailerBytes);
  const std::size_t current = payload.find("CURRENT");
  REQUIRE(current != std::string::npos);
  payload[current + 7 + 8 + 1] ^= 1;  // a byte of CURRENT's content
  format::Sha256 sha;
  sha.Update(payload);
  const auto digest = sha.Finish();
  test_support::WriteFile(
      dir.Sub("bad.db"),
      payload + std::string(reinterpret_cast<const char*>(digest.data()), digest.size()));
  Result<SnapshotInfo> bad = ReadSnapshotStatus(dir.Sub("bad.db"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message().find("checksum mismatch in file CURRENT") != std::string::npos);
}

}  // namespace
}  // namespace epoch::ctl
