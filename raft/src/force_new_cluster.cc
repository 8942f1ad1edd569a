#include "epoch/raft/force_new_cluster.h"

#include <algorithm>

namespace epoch::raft {
namespace {

// Committed entries are read back in chunks of this many data bytes.
constexpr std::uint64_t kReadChunkBytes = 4U << 20;

// The configuration after the committed entries (log.FirstIndex(), commit].
ConfState CommittedConf(const LogReader& log, LogIndex commit) {
  ConfState conf = log.LastSnapshot().conf;
  LogIndex next = log.FirstIndex();
  while (next <= commit) {
    const std::vector<Entry> chunk = log.Entries(next, commit.Next(), kReadChunkBytes);
    conf = ApplyConfChangeEntries(std::move(conf), chunk);
    next = chunk.back().index.Next();
  }
  return conf;
}

}  // namespace

ConfState ApplyConfChangeEntries(ConfState conf, std::span<const Entry> entries) {
  for (const Entry& e : entries) {
    if (e.type != EntryType::kConfChange) continue;
    const std::optional<ConfChange> change = DecodeConfChange(e.data);
    if (!change) continue;
    Result<ConfState> next = ApplyConfChange(conf, *change);
    if (next.ok()) conf = std::move(*next);
  }
  return conf;
}

std::vector<ConfChange> ForcedConfChanges(const ConfState& conf, NodeId self) {
  std::vector<ConfChange> changes;
  if (IsLearner(conf, self)) {
    changes.push_back({ConfChangeType::kPromoteLearner, self, {}});
  } else if (!IsVoter(conf, self)) {
    changes.push_back({ConfChangeType::kAddVoter, self, {}});
  }
  std::vector<NodeId> others;
  for (NodeId id : conf.voters) others.push_back(id);
  for (NodeId id : conf.learners) others.push_back(id);
  std::sort(others.begin(), others.end());
  for (NodeId id : others) {
    if (id != self) changes.push_back({ConfChangeType::kRemoveNode, id, {}});
  }
  return changes;
}

ForcedStart PlanForcedStart(const LogReader& log, LogIndex applied, NodeId self,
                            const std::function<std::string(const ConfChange&)>& context) {
  const HardState hs = log.InitialHardState();
  ForcedStart plan;
  plan.hard_state = hs;
  // The commit index is persisted lazily (a commit-only hard state is not synced), but what the
  // state machine applied was committed: the higher of the two, within the log.
  plan.commit = std::min(std::max({hs.commit, applied, log.LastSnapshot().index}), log.LastIndex());
  plan.conf = CommittedConf(log, plan.commit);
  const std::vector<ConfChange> changes = ForcedConfChanges(plan.conf, self);
  // Already alone: every entry it holds was appended by itself as the only voter, so nothing is
  // discarded and the start is an ordinary restart.
  if (changes.empty()) return plan;
  plan.discarded = log.LastIndex().value() - plan.commit.value();
  const Term term = std::max(hs.term, log.TermAt(plan.commit).value_or(Term(0)));
  LogIndex index = plan.commit;
  for (ConfChange change : changes) {
    change.context = context(change);
    index = index.Next();
    plan.entries.push_back(Entry{term, index, EntryType::kConfChange, EncodeConfChange(change)});
  }
  plan.hard_state = HardState{term, term == hs.term ? hs.vote : kNoNode, index};
  return plan;
}

}  // namespace epoch::raft
