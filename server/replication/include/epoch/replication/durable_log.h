// DurableLog: what the Raft driver needs from persistent storage — the core's read view
// (raft::LogReader) plus an asynchronous, ordered "make this Ready durable" operation.
//
// Who implements it: WalLog (wal_log.h) over wal::Wal in production; MemoryDurableLog
// below in driver tests. Who calls it: RaftDriver only, from its own thread.
//
// Contract of Persist: applied in call order; the snapshot meta first (the log becomes empty
// after it), then entries (a first index <= LastIndex() truncates the suffix from there), then
// the hard state. The LogReader view reflects the call at once (before it is durable: the core
// only reads entries it was told are stable). `done` runs exactly once, on any thread, after the
// write is durable (sync == true) or written (sync == false), or with the error that made the
// log fail-stop; after an error every later Persist fails too.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "epoch/raft/log_reader.h"
#include "epoch/raft/memory_log.h"
#include "epoch/status.h"

namespace epoch::server {

class DurableLog : public raft::LogReader {
 public:
  using DoneCallback = std::function<void(Status)>;

  virtual void Persist(const std::optional<raft::SnapshotMeta>& snapshot,
                       const std::vector<raft::Entry>& entries,
                       const std::optional<raft::HardState>& hard_state, bool sync,
                       DoneCallback done) = 0;
  // Drops entries <= index after the state machine snapshotted at `index` with membership `conf`.
  virtual Status Compact(LogIndex index, const raft::ConfState& conf) = 0;
};

// The in-memory twin: durable immediately; `done` runs inline.
class MemoryDurableLog final : public DurableLog {
 public:
  explicit MemoryDurableLog(raft::MemoryLog log) : log_(std::move(log)) {}

  raft::HardState InitialHardState() const override { return log_.InitialHardState(); }
  raft::SnapshotMeta LastSnapshot() const override { return log_.LastSnapshot(); }
  LogIndex FirstIndex() const override { return log_.FirstIndex(); }
  LogIndex LastIndex() const override { return log_.LastIndex(); }
  std::optional<Term> TermAt(LogIndex index) const override { return log_.TermAt(index); }
  std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi,
                                   std::uint64_t max_bytes) const override {
    return log_.Entries(lo, hi, max_bytes);
  }

  void Persist(const std::optional<raft::SnapshotMeta>& snapshot,
               const std::vector<raft::Entry>& entries,
               const std::optional<raft::HardState>& hard_state, bool /*sync*/,
               DoneCallback done) override {
    if (snapshot) log_.ApplySnapshot(*snapshot);
    if (!entries.empty()) log_.Append(entries);
    if (hard_state) log_.SetHardState(*hard_state);
    done(Status::Ok());
  }
  Status Compact(LogIndex index, const raft::ConfState& conf) override {
    log_.Compact(index, conf);
    return Status::Ok();
  }

 private:
  raft::MemoryLog log_;
};

}  // namespace epoch::server
