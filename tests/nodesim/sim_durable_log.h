// SimDurableLog: the simulated disk under one node's Raft driver. Persist() takes effect in the
// read view at once (the DurableLog contract) and is queued; the simulator completes the queue
// one write at a time after a simulated disk latency (Complete), and a crash (Crash) keeps only
// what was completed: the writes still queued are lost and their callbacks never run. The durable
// copy survives the node's process objects, so a restarted driver reads it.
//
// What this models and what it does not: a node's log writes are ordered and each completes
// whole (the WAL's own power-loss behaviour — torn and reordered pages — is checked by
// wal/'s tests on SimFileSystem).
//
// Threading: the simulator's thread only.
#pragma once

#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "epoch/raft/memory_log.h"
#include "epoch/replication/durable_log.h"

namespace epoch::nodesim {

class SimDurableLog final : public server::DurableLog {
 public:
  explicit SimDurableLog(raft::MemoryLog durable) : durable_(std::move(durable)), view_(durable_) {}

  raft::HardState InitialHardState() const override { return view_.InitialHardState(); }
  raft::SnapshotMeta LastSnapshot() const override { return view_.LastSnapshot(); }
  LogIndex FirstIndex() const override { return view_.FirstIndex(); }
  LogIndex LastIndex() const override { return view_.LastIndex(); }
  std::optional<Term> TermAt(LogIndex index) const override { return view_.TermAt(index); }
  std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi,
                                   std::uint64_t max_bytes) const override {
    return view_.Entries(lo, hi, max_bytes);
  }

  void Persist(const std::optional<raft::SnapshotMeta>& snapshot,
               const std::vector<raft::Entry>& entries,
               const std::optional<raft::HardState>& hard_state, bool sync,
               DoneCallback done) override {
    Write write{snapshot, entries, hard_state, sync, std::move(done)};
    ApplyTo(view_, write);
    queue_.push_back(std::move(write));
  }
  Status Compact(LogIndex index, const raft::ConfState& conf) override {
    view_.Compact(index, conf);
    return Status::Ok();
  }

  [[nodiscard]] bool HasPending() const { return !queue_.empty(); }
  // The oldest queued write reaches the disk; its callback runs (on the simulator's thread, as
  // the WAL's sync thread would run it: it only posts to the driver's strand).
  void Complete() {
    Write write = std::move(queue_.front());
    queue_.pop_front();
    ApplyTo(durable_, write);
    write.done(Status::Ok());
  }
  // Power loss: the queued writes never happened.
  void Crash() {
    queue_.clear();
    view_ = durable_;
  }
  [[nodiscard]] const raft::MemoryLog& durable() const { return durable_; }

 private:
  struct Write {
    std::optional<raft::SnapshotMeta> snapshot;
    std::vector<raft::Entry> entries;
    std::optional<raft::HardState> hard_state;
    bool sync = true;
    DoneCallback done;
  };
  static void ApplyTo(raft::MemoryLog& log, const Write& write) {
    if (write.snapshot) log.ApplySnapshot(*write.snapshot);
    if (!write.entries.empty()) log.Append(write.entries);
    if (write.hard_state) log.SetHardState(*write.hard_state);
  }

  raft::MemoryLog durable_;  // what survives a crash
  raft::MemoryLog view_;     // what the core reads: durable plus the queued writes
  std::deque<Write> queue_;
};

}  // namespace epoch::nodesim
