// ForceNewCluster: etcd's --force-new-cluster, at start. A cluster lost its quorum for good; the
// operator restarts one surviving member on its data directory with the flag, and it becomes the
// only member of the same cluster (same cluster ID), to be grown back with etcdctl member add.
//
// The member keeps its state machine and every entry it knows committed, discards the entries
// after that (never known committed: they are lost), and appends configuration changes that
// remove every other voter and learner, recorded committed (raft/force_new_cluster.h). Each
// change carries its member-table change, so the core and the state machine apply both from the
// same entry when the node starts: the member table then records the others as removed, their
// IDs are never reused, and a removed member that comes back is told REMOVED (docs/formats.md
// §5.5). Nothing else changes: the entries are ordinary committed log entries, and a later
// restart, with or without the flag, replays them as any others.
//
// <data-dir>/force-new-cluster records a forced start ("forced_index <n>"): a later start with
// the flag still set ignores it, with a warning, rather than removing the members added since.
// Deleting that file lets the flag force again.
//
// Who calls it: EpochNode's storage phase, after the WAL and the state machine are open and the
// member table seeded, before the Raft core is built. Threading: the starting thread.
#pragma once

#include <string>

#include "epoch/node/node_config.h"
#include "epoch/raft/conf_change.h"
#include "epoch/state/kv_store.h"
#include "epoch/status.h"
#include "epoch/wal/wal.h"

namespace epoch::server {

inline constexpr char kForcedFile[] = "force-new-cluster";

// Does the above when `config.force_new_cluster` is set; a no-op otherwise, and (with a warning)
// for a data directory without a log or one already forced. FailedPrecondition for a member its
// committed configuration does not hold (it was removed).
[[nodiscard]] Status ForceNewCluster(const NodeConfig& config, wal::Wal& wal, const KvStore& store);

// The member-table change a forced configuration change carries: a serialized
// v1::InternalRequest whose member_change removes, promotes or adds (at its own peer URL) the
// member the change names.
[[nodiscard]] std::string ForcedChangeContext(const NodeConfig& config,
                                              const raft::ConfChange& change);

}  // namespace epoch::server
