// SnapshotOptions: the knobs of snapshots and log compaction (epochd flags --snapshot-count,
// --snapshot-bytes, --snapshot-catchup-entries, --snapshot-chunk-bytes,
// --snapshot-send-timeout-ms; server/SNAPSHOT.md).
//
// Threading: a plain value.
#pragma once

#include <chrono>

#include "epoch/snapshot/snapshot_compaction.h"
#include "epoch/snapshot/snapshot_transfer.h"

namespace epoch::server {

struct SnapshotOptions {
  CompactionOptions compaction;
  SnapshotSendOptions send;
  // A receiver discards an incomplete transfer that got no chunk for this long.
  std::chrono::milliseconds receive_idle_timeout{30'000};
  // Bytes per SnapshotResponse message of Maintenance.Snapshot (etcd sends 32 KiB).
  std::size_t archive_message_bytes = 64 << 10;
  // A Maintenance.Snapshot stream whose pending message is not taken by the client for this long
  // is cancelled: an unread download would otherwise pin its checkpoint and buffers forever.
  std::chrono::milliseconds archive_write_timeout{30'000};
};

}  // namespace epoch::server
