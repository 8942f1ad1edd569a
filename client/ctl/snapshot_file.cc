// Snapshot file verification (see snapshot_file.h and server/SNAPSHOT.md §1).
#include "snapshot_file.h"

#include <fmt/format.h>

#include <fstream>

#include "epoch/snapshot_format/snapshot_format.h"

namespace epoch::ctl {

Result<SnapshotInfo> ReadSnapshotInfo(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IOError(fmt::format("cannot open {}", path));
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  Result<snapshot_format::VerifiedHead> head = snapshot_format::VerifyTrailerAndHeader(
      path, size, [&](std::uint64_t offset, char* out, std::size_t n) {
        in.seekg(static_cast<std::streamoff>(offset));
        if (!in.read(out, static_cast<std::streamsize>(n))) {
          return Status::IOError(fmt::format("{}: read failed", path));
        }
        return Status::Ok();
      });
  if (!head.ok()) return head.status();
  const snapshot_format::Header& h = head->header;
  SnapshotInfo info;
  for (unsigned char b : head->sha256) info.sha256_hex += fmt::format("{:02x}", b);
  info.applied_index = h.applied_index.value();
  info.applied_term = h.applied_term.value();
  info.revision = h.revision.value();
  info.cluster_id = h.cluster_id;
  info.created_unix_ms = h.created_unix_ms;
  for (NodeId id : h.conf.voters) info.voters.push_back(id.value());
  for (NodeId id : h.conf.learners) info.learners.push_back(id.value());
  info.file_count = h.file_count;
  info.total_bytes = size;
  return info;
}

}  // namespace epoch::ctl
