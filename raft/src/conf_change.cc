#include "epoch/raft/conf_change.h"

#include <fmt/format.h>

#include <algorithm>

namespace epoch::raft {

std::string EncodeConfChange(const ConfChange& change) {
  std::string out(kConfChangeHeaderBytes + change.context.size(), '\0');
  out[0] = static_cast<char>(change.type);
  std::uint64_t id = change.node.value();
  for (int i = 0; i < 8; ++i) out[1 + i] = static_cast<char>((id >> (8 * i)) & 0xff);
  std::copy(change.context.begin(), change.context.end(), out.begin() + kConfChangeHeaderBytes);
  return out;
}

std::optional<ConfChange> DecodeConfChange(std::string_view data) {
  if (data.size() < kConfChangeHeaderBytes) return std::nullopt;
  const auto type = static_cast<std::uint8_t>(data[0]);
  if (type < 1 || type > 5) return std::nullopt;
  std::uint64_t id = 0;
  for (int i = 0; i < 8; ++i) {
    id |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(data[1 + i])) << (8 * i);
  }
  if (id == 0) return std::nullopt;
  return ConfChange{static_cast<ConfChangeType>(type), NodeId(id),
                    std::string(data.substr(kConfChangeHeaderBytes))};
}

namespace {

bool Contains(const std::vector<NodeId>& ids, NodeId id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

void Erase(std::vector<NodeId>& ids, NodeId id) {
  ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
}

void Insert(std::vector<NodeId>& ids, NodeId id) {
  ids.insert(std::upper_bound(ids.begin(), ids.end(), id), id);
}

}  // namespace

bool IsVoter(const ConfState& conf, NodeId id) { return Contains(conf.voters, id); }
bool IsLearner(const ConfState& conf, NodeId id) { return Contains(conf.learners, id); }

Result<ConfState> ApplyConfChange(const ConfState& conf, const ConfChange& change) {
  const NodeId id = change.node;
  if (id == kNoNode) return Status::InvalidArgument("conf change names node 0");
  ConfState next = conf;
  const bool member = IsVoter(conf, id) || IsLearner(conf, id);
  switch (change.type) {
    case ConfChangeType::kAddLearner:
    case ConfChangeType::kAddVoter:
      if (member) return Status::InvalidArgument(fmt::format("node {} is already a member", id));
      Insert(change.type == ConfChangeType::kAddVoter ? next.voters : next.learners, id);
      return next;
    case ConfChangeType::kUpdateNode:
      if (!member) return Status::InvalidArgument(fmt::format("node {} is not a member", id));
      return next;
    case ConfChangeType::kPromoteLearner:
      if (!IsLearner(conf, id)) {
        return Status::InvalidArgument(fmt::format("node {} is not a learner", id));
      }
      Erase(next.learners, id);
      Insert(next.voters, id);
      return next;
    case ConfChangeType::kRemoveNode:
      if (IsLearner(conf, id)) {
        Erase(next.learners, id);
        return next;
      }
      if (!IsVoter(conf, id)) {
        return Status::InvalidArgument(fmt::format("node {} is not a member", id));
      }
      if (conf.voters.size() == 1) {
        return Status::InvalidArgument(fmt::format("node {} is the last voter", id));
      }
      Erase(next.voters, id);
      return next;
  }
  return Status::InvalidArgument("unknown conf change type");
}

SnapshotMeta BootstrapSnapshot(std::vector<NodeId> voters) {
  std::sort(voters.begin(), voters.end());
  voters.erase(std::unique(voters.begin(), voters.end()), voters.end());
  return SnapshotMeta{kBootstrapIndex, kBootstrapTerm, ConfState{std::move(voters), {}}};
}

}  // namespace epoch::raft
