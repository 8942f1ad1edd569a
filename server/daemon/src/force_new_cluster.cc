#include "force_new_cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <optional>

#include "epoch/raft/force_new_cluster.h"
#include "member_join.h"

namespace epoch::server {
namespace {

// The index <data-dir>/force-new-cluster records, or nullopt when the file is absent.
Result<std::optional<LogIndex>> ReadForcedIndex(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<LogIndex>();
  std::ifstream in(path);
  std::string key;
  std::uint64_t index = 0;
  in >> key >> index;
  if (!in || key != "forced_index") {
    return Status::Corruption(fmt::format("{}: not 'forced_index <n>'", path));
  }
  return std::optional<LogIndex>(LogIndex(index));
}

// Appends the forced entries and hard state, and waits until they are durable.
Status AppendDurably(wal::Wal& wal, const raft::ForcedStart& plan) {
  std::promise<Status> promise;
  std::future<Status> durable = promise.get_future();
  Status accepted = wal.Append(plan.entries, plan.hard_state,
                               [&promise](const Status& s) { promise.set_value(s); });
  if (!accepted.ok()) return accepted;
  return durable.get();
}

std::vector<std::string> Removed(const raft::ForcedStart& plan) {
  std::vector<std::string> removed;
  for (const raft::Entry& e : plan.entries) {
    std::optional<raft::ConfChange> change = raft::DecodeConfChange(e.data);
    if (change && change->type == raft::ConfChangeType::kRemoveNode) {
      removed.push_back(fmt::format("{:x}", change->node.value()));
    }
  }
  return removed;
}

}  // namespace

std::string ForcedChangeContext(const NodeConfig& config, const raft::ConfChange& change) {
  v1::InternalRequest request;
  v1::MemberChange& member = *request.mutable_member_change();
  member.set_id(change.node.value());
  switch (change.type) {
    case raft::ConfChangeType::kRemoveNode: member.set_kind(v1::MemberChange::REMOVE); break;
    case raft::ConfChangeType::kPromoteLearner: member.set_kind(v1::MemberChange::PROMOTE); break;
    default:  // kAddVoter of itself: ForcedConfChanges makes no other kind
      member.set_kind(v1::MemberChange::ADD);
      member.add_peer_urls(OwnPeerUrl(config));
      break;
  }
  return request.SerializeAsString();
}

Status ForceNewCluster(const NodeConfig& config, wal::Wal& wal, const KvStore& store) {
  if (!config.force_new_cluster) return Status::Ok();
  Result<std::optional<LogIndex>> forced = ReadForcedIndex(config.data_dir + "/" + kForcedFile);
  if (!forced.ok()) return forced.status();
  if (forced->has_value()) {
    SPDLOG_WARN(
        "name={} node={:x} --force-new-cluster ignored: this member was forced at index {} "
        "({}/{}); remove the flag (delete that file to force again)",
        config.name, config.self_id(), **forced, config.data_dir, kForcedFile);
    return Status::Ok();
  }
  if (wal.LastSnapshot().IsEmpty() && wal.LastIndex() == LogIndex(0)) {
    SPDLOG_WARN("name={} node={:x} --force-new-cluster ignored: {} holds no log", config.name,
                config.self_id(), config.data_dir);
    return Status::Ok();
  }
  const raft::ForcedStart plan = raft::PlanForcedStart(
      wal, store.AppliedIndex(), config.self_id(),
      [&config](const raft::ConfChange& c) { return ForcedChangeContext(config, c); });
  // A member its committed configuration no longer holds was removed: its member table says so,
  // and it would stop as removed before applying a change that adds it back.
  if (!raft::IsVoter(plan.conf, config.self_id()) &&
      !raft::IsLearner(plan.conf, config.self_id())) {
    return Status::FailedPrecondition(fmt::format(
        "--force-new-cluster: member {:x} is not in the configuration its log commits (it was "
        "removed): force another member",
        config.self_id()));
  }
  if (plan.entries.empty()) {
    SPDLOG_INFO("name={} node={:x} --force-new-cluster: already the only member, nothing to force",
                config.name, config.self_id());
    return Status::Ok();
  }
  SPDLOG_WARN(
      "forcing restart member name={} node={:x} cluster={:x} commit={} "
      "discarded-uncommitted-entries={} last-index={} removed=[{}]",
      config.name, config.self_id(), config.cluster_id(), plan.commit, plan.discarded,
      wal.LastIndex(), fmt::join(Removed(plan), ","));
  EPOCH_RETURN_IF_ERROR(AppendDurably(wal, plan).Annotate("--force-new-cluster: append"));
  return WriteDataDirFile(config.data_dir, kForcedFile,
                          fmt::format("forced_index {}\n", plan.hard_state.commit));
}

}  // namespace epoch::server
