#include "epoch/snapshot/snapshot_checkpoints.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "epoch/snapshot/snapshot_io.h"

namespace epoch::server {

Checkpoint::~Checkpoint() {
  if (dir.empty()) return;
  Status removed = snapshot_io::RemoveAll(dir);
  if (!removed.ok()) spdlog::warn("snapshot: {}", removed.ToString());
}

Result<std::shared_ptr<const Checkpoint>> CheckpointCache::Acquire(LogIndex min_applied) {
  if (auto newest = newest_.lock(); newest && newest->applied >= min_applied) return newest;
  return Create();
}

Result<std::shared_ptr<const Checkpoint>> CheckpointCache::Create() {
  auto checkpoint = std::make_shared<Checkpoint>();
  const std::string dir = fmt::format("{}/ckpt-{}", root_, ++seq_);
  (void)snapshot_io::RemoveAll(dir);  // a leftover of an earlier run with the same number
  Result<KvStore::ImageMeta> image = store_.CreateCheckpoint(dir);
  if (!image.ok()) {
    (void)snapshot_io::RemoveAll(dir);
    return image.status().Annotate("checkpoint the state machine");
  }
  checkpoint->dir = dir;  // from here on the destructor cleans up
  checkpoint->applied = image->applied;
  checkpoint->revision = image->revision;
  Result<std::vector<ArchiveFile>> files = ListCheckpointFiles(dir);
  if (!files.ok()) return files.status();
  checkpoint->files = std::move(*files);
  newest_ = checkpoint;
  return std::shared_ptr<const Checkpoint>(std::move(checkpoint));
}

}  // namespace epoch::server
