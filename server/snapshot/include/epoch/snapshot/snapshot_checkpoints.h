// CheckpointCache: RocksDB checkpoints of the state machine under <data-dir>/snap, shared by the
// outgoing snapshot transfers and Maintenance.Snapshot streams that read them.
//
// A checkpoint is a directory of hard links to the store's immutable files (cheap to make, no
// copy), flushed first so it holds every applied write. It is removed from disk when its last
// user drops it. A transfer that needs a checkpoint at or past some index reuses the newest one
// still in use if it qualifies; otherwise a new one is taken.
//
// Threading: Acquire/Create run on one thread, the snapshot manager's I/O thread, never on the
// driver's strand: creating a checkpoint flushes the memtables (KvStore::CreateCheckpoint may run
// while the applier goes on; the image's applied index is read from the image). The returned
// Checkpoint is immutable and may be read and released on any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "epoch/snapshot/snapshot_archive.h"
#include "epoch/state/kv_store.h"
#include "epoch/status.h"

namespace epoch::server {

struct Checkpoint {
  std::string dir;
  LogIndex applied;   // the state machine's applied index in this image
  Revision revision;  // its store revision
  std::vector<ArchiveFile> files;

  Checkpoint() = default;
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;
  ~Checkpoint();  // removes `dir`
};

class CheckpointCache {
 public:
  CheckpointCache(std::string root, KvStore& store) : root_(std::move(root)), store_(store) {}

  // The newest checkpoint still in use if its applied index >= min_applied, else a new one.
  [[nodiscard]] Result<std::shared_ptr<const Checkpoint>> Acquire(LogIndex min_applied);
  // Always a new checkpoint of the current state.
  [[nodiscard]] Result<std::shared_ptr<const Checkpoint>> Create();

  [[nodiscard]] std::uint64_t created() const { return seq_; }

 private:
  const std::string root_;
  KvStore& store_;
  std::weak_ptr<const Checkpoint> newest_;
  std::uint64_t seq_ = 0;
};

}  // namespace epoch::server
