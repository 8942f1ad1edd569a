// Restore mode of epochd (`epochd --restore-snapshot FILE ...`, server/SNAPSHOT.md §2): turns a
// snapshot archive saved with `etcdctl snapshot save` into the data directory of one member of a
// NEW cluster, as `etcdctl snapshot restore` does for etcd. Every member of the new cluster
// restores the same file with its own --name and --data-dir and the same --initial-cluster; then
// they are started normally.
//
// The state machine comes from the archive's checkpoint (applied index A, revision R, leases and
// the cluster clock included); the Raft log starts empty after a snapshot at index max(A, 1),
// term 1, whose membership is the new --initial-cluster, with hard state {term 1, no vote,
// commit max(A, 1)}. The old cluster's membership and terms are not carried over.
//
// Who calls it: daemon/src/main.cc. Threading: runs alone, before any node is started.
#pragma once

#include <string>

#include "epoch/node/node_config.h"
#include "epoch/snapshot/snapshot_archive.h"
#include "epoch/status.h"

namespace epoch::server {

struct RestoreResult {
  ArchiveHeader archive;
  LogIndex snapshot_index;  // where the new member's log starts
  std::size_t voters = 0;
};

// Refuses a non-empty data directory and an archive that fails verification (size, SHA-256,
// structure), with messages that say which. On success the directory holds <data-dir>/kv and
// <data-dir>/wal, both fsynced.
[[nodiscard]] Result<RestoreResult> RestoreSnapshot(const std::string& archive_path,
                                                    const NodeConfig& config);

}  // namespace epoch::server
