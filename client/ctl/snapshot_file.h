// Reading an Epoch snapshot file (server/SNAPSHOT.md §1) on the client side, with the format
// library epochd uses (epoch::snapshot_format): the size rule (len % 512 == 32), the SHA-256
// trailer, the archive header and, for `snapshot status`, the image itself: its files are
// unpacked into a temporary directory and opened as the RocksDB database they are (read-only,
// every column family) to count its records.
//
// Threading: pure functions (each call uses its own temporary directory).
#pragma once

#include <cstdint>
#include <optional>
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
  // Every record of the image, in every column family: live keys, every revision of the history,
  // leases, meta records; as etcd's `snapshot status` counts every entry of every bbolt bucket.
  // Set by ReadSnapshotStatus only.
  std::optional<std::uint64_t> total_keys;

  // etcdctl's hash column: a uint32 (there a CRC-32 of the buckets), here the first four bytes
  // of the SHA-256 trailer, big-endian.
  [[nodiscard]] std::uint32_t Hash32() const;
};

// Verifies the size rule, the trailer and the header of the file at `path` and describes it.
// Errors name what is wrong (truncated, checksum mismatch, not an Epoch snapshot, unsupported
// version, header checksum).
Result<SnapshotInfo> ReadSnapshotInfo(const std::string& path);

// ReadSnapshotInfo, then every file entry (names, CRC-32C, end marker, padding) while unpacking
// them into a temporary directory under $TMPDIR (removed before returning), and the number of
// records of the RocksDB image they make up (total_keys). Needs free space for one copy of the
// image.
Result<SnapshotInfo> ReadSnapshotStatus(const std::string& path);

}  // namespace epoch::ctl
