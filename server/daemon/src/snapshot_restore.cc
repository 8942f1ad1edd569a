#include "epoch/daemon/snapshot_restore.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <future>

#include "epoch/raft/conf_change.h"
#include "epoch/snapshot/snapshot_io.h"
#include "epoch/state/kv_store.h"
#include "epoch/wal/posix_file_system.h"
#include "epoch/wal/wal.h"
#include "peer_membership.h"

namespace epoch::server {
namespace {

// Submits a WAL request and blocks until it is durable.
Status AwaitDurable(const std::function<Status(wal::DurableCallback)>& submit) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  Status accepted = submit([&promise](const Status& s) { promise.set_value(s); });
  if (!accepted.ok()) return accepted;
  return future.get();
}

Status WriteLog(const std::string& wal_dir, const raft::SnapshotMeta& meta) {
  wal::PosixFileSystem fs;
  auto opened = wal::Wal::Open(fs, wal_dir, wal::Options{});
  if (!opened.ok()) return opened.status().Annotate("create WAL");
  wal::Wal& log = **opened;
  EPOCH_RETURN_IF_ERROR(AwaitDurable(
      [&](wal::DurableCallback done) { return log.SaveSnapshot(meta, std::move(done)); }));
  const raft::HardState hard_state{raft::kBootstrapTerm, raft::kNoNode, meta.index};
  EPOCH_RETURN_IF_ERROR(AwaitDurable(
      [&](wal::DurableCallback done) { return log.SaveHardState(hard_state, std::move(done)); }));
  return log.Close();
}

Result<RestoreResult> Restore(const std::string& archive_path, const NodeConfig& config) {
  const std::string kv_dir = config.data_dir + "/kv";
  Result<ArchiveHeader> header = UnpackArchive(archive_path, kv_dir);
  if (!header.ok()) return header.status();
  {
    // Open once: proves the image is a usable store and reads the applied index it really holds.
    auto store = KvStore::Open(kv_dir, KvStoreOptions{});
    if (!store.ok()) return store.status().Annotate("open the restored state machine");
    if ((*store)->AppliedIndex() != header->applied_index) {
      return Status::Corruption(
          fmt::format("the snapshot's state machine is at applied index {} but its header says {}",
                      (*store)->AppliedIndex(), header->applied_index));
    }
    // The new cluster's members, not the ones of the cluster the snapshot came from.
    EPOCH_RETURN_IF_ERROR((*store)->ReplaceMemberTable(InitialMemberTableOf(config)));
    Result<LogIndex> flushed = (*store)->Flush();
    if (!flushed.ok()) return flushed.status().Annotate("flush the restored state machine");
  }
  RestoreResult result;
  result.archive = *header;
  result.snapshot_index = std::max(header->applied_index, raft::kBootstrapIndex);
  std::vector<NodeId> voters;
  for (const MemberInfo& m : config.members) voters.push_back(m.id);
  result.voters = voters.size();
  raft::SnapshotMeta meta = raft::BootstrapSnapshot(std::move(voters));
  meta.index = result.snapshot_index;
  EPOCH_RETURN_IF_ERROR(WriteLog(config.data_dir + "/wal", meta));
  EPOCH_RETURN_IF_ERROR(snapshot_io::SyncDir(config.data_dir));
  return result;
}

}  // namespace

Result<RestoreResult> RestoreSnapshot(const std::string& archive_path, const NodeConfig& config) {
  Result<bool> empty = snapshot_io::IsMissingOrEmpty(config.data_dir);
  if (!empty.ok()) return empty.status().Annotate("--data-dir");
  if (!*empty) {
    return Status::FailedPrecondition(fmt::format(
        "--data-dir {} is not empty: a snapshot is restored into a fresh directory (the restored "
        "member starts a new cluster); move the old directory away first",
        config.data_dir));
  }
  std::error_code ec;
  const bool created = std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    return Status::IOError(fmt::format("create --data-dir {}: {}", config.data_dir, ec.message()));
  }
  Result<RestoreResult> result = Restore(archive_path, config);
  if (!result.ok()) {
    // Leave the directory as it was: empty (or absent), so the operator can simply retry.
    (void)snapshot_io::RemoveAll(config.data_dir + "/kv");
    (void)snapshot_io::RemoveAll(config.data_dir + "/wal");
    if (created) (void)snapshot_io::RemoveAll(config.data_dir);
  }
  return result;
}

}  // namespace epoch::server
