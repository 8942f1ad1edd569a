// WalLog: DurableLog over wal::Wal — how the Raft driver persists each Ready in production.
// The WAL already orders requests and group-commits them; this adapter only maps one Ready's
// snapshot / entries / hard state onto its requests and reports when the last one is durable.
//
// A Ready whose only change is the commit index (`sync == false`, etcd's MustSync) needs no
// durability: the hard state is kept and written with the next synced request, and `done` runs at
// once. The commit index is a hint after a crash (raft clamps it; the state machine's applied
// index is durable with its data), so a lost commit-only update is safe; it saves the fdatasync
// that would otherwise sit on every write's critical path (bench/kv/PROFILE.md, finding 1).
//
// Threading: Persist and Compact from one thread (the Raft strand); `done` runs on the WAL's sync
// thread, or inline for a commit-only Ready.
#pragma once

#include <optional>

#include "epoch/replication/durable_log.h"
#include "epoch/wal/wal.h"

namespace epoch::server {

class WalLog final : public DurableLog {
 public:
  explicit WalLog(wal::Wal& wal) : wal_(wal) {}

  raft::HardState InitialHardState() const override { return wal_.InitialHardState(); }
  raft::SnapshotMeta LastSnapshot() const override { return wal_.LastSnapshot(); }
  LogIndex FirstIndex() const override { return wal_.FirstIndex(); }
  LogIndex LastIndex() const override { return wal_.LastIndex(); }
  std::optional<Term> TermAt(LogIndex index) const override { return wal_.TermAt(index); }
  std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi,
                                   std::uint64_t max_bytes) const override {
    return wal_.Entries(lo, hi, max_bytes);
  }

  void Persist(const std::optional<raft::SnapshotMeta>& snapshot,
               const std::vector<raft::Entry>& entries,
               const std::optional<raft::HardState>& hard_state, bool sync,
               DoneCallback done) override;
  Status Compact(LogIndex index, const raft::ConfState& conf) override;

 private:
  wal::Wal& wal_;
  std::optional<raft::HardState> deferred_hard_state_;  // commit-only, not yet written
};

}  // namespace epoch::server
