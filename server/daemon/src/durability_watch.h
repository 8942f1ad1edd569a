// DurabilityWatch: the Raft driver's DurableLog, seen through a watch on how long its writes take
// to become durable. Every call goes to the wrapped log unchanged; Persist's completion is timed,
// so the health probes can tell a member whose disk has stalled (docs/metrics.md "Health"): a
// write outstanding longer than the durability-stall bound makes /health and /readyz fail.
//
// Threading: Persist is called from the driver's strand; completions run on the WAL's threads;
// OldestPendingAge() from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <optional>

#include "epoch/replication/durable_log.h"

namespace epoch::server {

class DurabilityWatch final : public DurableLog {
 public:
  explicit DurabilityWatch(DurableLog& inner) : inner_(inner) {}

  void Persist(const std::optional<raft::SnapshotMeta>& snapshot,
               const std::vector<raft::Entry>& entries,
               const std::optional<raft::HardState>& hard_state, bool sync,
               DoneCallback done) override;
  Status Compact(LogIndex index, const raft::ConfState& conf) override {
    return inner_.Compact(index, conf);
  }

  [[nodiscard]] raft::HardState InitialHardState() const override {
    return inner_.InitialHardState();
  }
  [[nodiscard]] raft::SnapshotMeta LastSnapshot() const override { return inner_.LastSnapshot(); }
  [[nodiscard]] LogIndex FirstIndex() const override { return inner_.FirstIndex(); }
  [[nodiscard]] LogIndex LastIndex() const override { return inner_.LastIndex(); }
  [[nodiscard]] std::optional<Term> TermAt(LogIndex index) const override {
    return inner_.TermAt(index);
  }
  [[nodiscard]] std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi,
                                                 std::uint64_t max_bytes) const override {
    return inner_.Entries(lo, hi, max_bytes);
  }

  // How long the oldest write not yet durable has been waiting; nullopt when none is.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> OldestPendingAge(
      std::chrono::steady_clock::time_point now) const;

 private:
  DurableLog& inner_;
  mutable std::mutex mu_;
  // Submission times of the writes in flight, oldest first (the log completes them in order).
  std::deque<std::chrono::steady_clock::time_point> pending_;  // guarded by mu_
};

}  // namespace epoch::server
