#include "epoch/replication/wal_log.h"

namespace epoch::server {

void WalLog::Persist(const std::optional<raft::SnapshotMeta>& snapshot,
                     const std::vector<raft::Entry>& entries,
                     const std::optional<raft::HardState>& hard_state, bool sync,
                     DoneCallback done) {
  // The WAL runs callbacks in submission order and fails every later request after an error, so
  // waiting for the last request's callback covers the earlier ones.
  if (!sync && !snapshot && entries.empty()) {
    if (hard_state) deferred_hard_state_ = hard_state;
    return done(Status::Ok());
  }
  std::optional<raft::HardState> hs = hard_state ? hard_state : deferred_hard_state_;
  deferred_hard_state_.reset();
  if (snapshot) {
    Status s = wal_.SaveSnapshot(*snapshot, [](const Status&) {});
    if (!s.ok()) return done(s.Annotate("save snapshot"));
  }
  if (entries.empty() && !hs) {
    wal_.Sync(std::move(done));
    return;
  }
  Status s = wal_.Append(entries, hs, done);
  if (!s.ok()) done(s.Annotate("append"));
}

Status WalLog::Compact(LogIndex index, const raft::ConfState& conf) {
  std::optional<Term> term = wal_.TermAt(index);
  if (!term) return Status::InvalidArgument("compact: index not in the log");
  return wal_.SaveSnapshot(raft::SnapshotMeta{index, *term, conf}, [](const Status&) {});
}

}  // namespace epoch::server
