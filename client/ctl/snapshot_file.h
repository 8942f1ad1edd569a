// Reading an Epoch snapshot file (server/SNAPSHOT.md §1) on the client side, with the format
// library epochd uses (epoch::snapshot_format): the size rule (len % 512 == 32), the SHA-256
// trailer, and the archive header. File contents are not opened (they are RocksDB files), so the
// number of keys is not known here.
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::ctl {

struct SnapshotInfo {
  std::string sha256_hex;  // the trailer (verified)
  std::uint64_t applied_index = 0;
  std::uint64_t applied_term = 0;
  std::int64_t revision = 0;
  std::uint64_t cluster_id = 0;
  std::int64_t created_unix_ms = 0;
  std::vector<std::uint64_t> voters;
  std::vector<std::uint64_t> learners;
  std::uint32_t file_count = 0;
  std::uint64_t total_bytes = 0;
};

// Verifies and describes the file at `path`. Errors name what is wrong (truncated, checksum
// mismatch, not an Epoch snapshot, unsupported version, header checksum).
Result<SnapshotInfo> ReadSnapshotInfo(const std::string& path);

}  // namespace epoch::ctl
