#include "epoch/server/wal_log.h"

namespace epoch::server {

void WalLog::Persist(const std::optional<raft::SnapshotMeta>& snapshot,
                     const std::vector<raft::Entry>& entries,
                     const std::optional<raft::HardState>& hard_state, bool /*sync*/,
                     DoneCallback done) {
  // Every WAL request is made durable by the group commit; `sync` is honoured by construction.
  // The WAL runs callbacks in submission order and fails every later request after an error, so
  // waiting for the last request's callback covers the earlier ones.
  if (snapshot) {
    Status s = wal_.SaveSnapshot(*snapshot, [](const Status&) {});
    if (!s.ok()) return done(s.Annotate("save snapshot"));
  }
  if (entries.empty() && !hard_state) {
    wal_.Sync(std::move(done));
    return;
  }
  Status s = wal_.Append(entries, hard_state, done);
  if (!s.ok()) done(s.Annotate("append"));
}

Status WalLog::Compact(LogIndex index, const raft::ConfState& conf) {
  std::optional<Term> term = wal_.TermAt(index);
  if (!term) return Status::InvalidArgument("compact: index not in the log");
  return wal_.SaveSnapshot(raft::SnapshotMeta{index, *term, conf}, [](const Status&) {});
}

}  // namespace epoch::server
