// Forcing a new one-member cluster from one member's log (etcd's --force-new-cluster): disaster
// recovery after a cluster lost its quorum for good.
//
// The member keeps every entry it knows committed and discards the rest, which no quorum may ever
// have held. It then appends configuration changes of its own — remove every other voter and
// every learner (first add or promote itself if it is not a voter) — and records them committed
// in its hard state. On start the core applies them as any committed entries, so the member's
// configuration and the state machine's member table (carried in each change's context) both end
// with this member as the only voter. This breaks Raft's safety on purpose: the removed members
// never agreed. It is only sound when they are gone for good.
//
// Who calls it: the server, before it builds the Raft core, when the operator asked for it; the
// server supplies each change's context and persists the result. Threading: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "epoch/raft/conf_change.h"
#include "epoch/raft/log_reader.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

// `conf` after every kConfChange entry of `entries`, in order. A change that does not apply is
// skipped, as the core skips it on every node (Raft::ApplyConfChangeEntry).
[[nodiscard]] ConfState ApplyConfChangeEntries(ConfState conf, std::span<const Entry> entries);

// The changes that leave `self` the only member of `conf`: kAddVoter for itself when it is not a
// member, or kPromoteLearner when it is a learner, then kRemoveNode for every other voter and
// every learner, in ID order. Each applies to the configuration the ones before it left. Empty
// when `self` already is the only member.
[[nodiscard]] std::vector<ConfChange> ForcedConfChanges(const ConfState& conf, NodeId self);

// What a forced start writes to the log.
struct ForcedStart {
  // The last entry kept: the highest index known committed (the persisted commit index, or what
  // the state machine already applied when that is higher: the commit index is persisted lazily).
  LogIndex commit;
  // The configuration the committed log gives (the snapshot's, then its committed changes).
  ConfState conf;
  // Entries after `commit` dropped: they were never known committed here.
  std::uint64_t discarded = 0;
  // The forced changes as entries at commit + 1..., of the hard state's term; empty when nothing
  // is to be forced (`self` is already the only member), and then nothing is discarded either.
  std::vector<Entry> entries;
  // Term and vote kept, commit = the last forced entry.
  HardState hard_state;
};

// The forced start of `self` from `log`, whose state machine has applied up to `applied`.
// `context` gives each change its context (the server's member-table change). Reads the
// committed entries after the snapshot to find their configuration changes.
[[nodiscard]] ForcedStart PlanForcedStart(
    const LogReader& log, LogIndex applied, NodeId self,
    const std::function<std::string(const ConfChange&)>& context);

}  // namespace epoch::raft
