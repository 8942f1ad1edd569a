#include "durability_watch.h"

namespace epoch::server {

void DurabilityWatch::Persist(const std::optional<raft::SnapshotMeta>& snapshot,
                              const std::vector<raft::Entry>& entries,
                              const std::optional<raft::HardState>& hard_state, bool sync,
                              DoneCallback done) {
  {
    std::lock_guard lock(mu_);
    pending_.push_back(std::chrono::steady_clock::now());
  }
  inner_.Persist(snapshot, entries, hard_state, sync,
                 [this, done = std::move(done)](Status status) {
                   {
                     std::lock_guard lock(mu_);
                     if (!pending_.empty()) pending_.pop_front();
                   }
                   done(std::move(status));
                 });
}

std::optional<std::chrono::nanoseconds> DurabilityWatch::OldestPendingAge(
    std::chrono::steady_clock::time_point now) const {
  std::lock_guard lock(mu_);
  if (pending_.empty()) return std::nullopt;
  return now - pending_.front();
}

}  // namespace epoch::server
