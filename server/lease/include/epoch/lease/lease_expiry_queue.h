// LeaseExpiryQueue: the leader's index of lease deadlines, ordered by deadline, so an expiry
// check reads only the leases whose deadline may have passed instead of the whole lease table.
//
// Each entry is a lower bound of its lease's deadline in the state machine: a grant's entry is
// scheduled when the leader stamps it (its applied deadline is at least that), and a full read
// of the table (at clock start) adds every stored lease. Renewals only move deadlines later, so
// they need no entry: when an entry comes due, the check reads the lease (Lookup) and moves the
// entry to the stored deadline, drops it when the lease is gone, or reports the lease expired
// (its entry stays until a later check finds it revoked).
//
// Who calls it: LeaseManager, on the driver's strand. Threading: not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::server {

class LeaseExpiryQueue {
 public:
  // The deadline (cluster ms) the state machine holds for `id`, or nullopt when it is gone.
  using Lookup = std::function<Result<std::optional<std::int64_t>>(LeaseId)>;

  struct Due {
    std::vector<LeaseId> expired;  // deadline at or before now, at most `max`
    std::uint64_t visited = 0;     // leases read through Lookup
    bool more = false;             // stopped at `max` expired with more entries due
    Status status;                 // a failed Lookup (the check stops there)
  };

  // Adds `id` with the lower bound `deadline_ms`, or lowers its entry to it.
  void Schedule(LeaseId id, std::int64_t deadline_ms);
  // Reads the due entries in deadline order: at most `max` expired leases.
  [[nodiscard]] Due CollectExpired(std::int64_t now_ms, std::size_t max, const Lookup& lookup);
  void Clear();

  // The earliest entry's deadline; nullopt when empty.
  [[nodiscard]] std::optional<std::int64_t> Earliest() const;
  [[nodiscard]] std::size_t size() const { return by_id_.size(); }

 private:
  void Move(LeaseId id, std::int64_t deadline_ms);

  std::set<std::pair<std::int64_t, LeaseId>> by_deadline_;
  std::unordered_map<std::int64_t, std::int64_t> by_id_;  // lease id -> its entry's deadline
};

}  // namespace epoch::server
