// The leader's bookkeeping for lease renewals and expiry (used by LeaseManager):
//
// KeepAliveBatcher collects keep-alives for a short window (a driver tick, a few ms) so that one
// `lease_checkpoint` log entry renews every lease kept alive meanwhile; the same lease sent
// several times in a window is renewed once and every sender is answered.
//
// LeaseInFlight decides, for each lease of a batch, whether to renew it or answer TTL = 0, and
// which expired leases to revoke, so that a renewal and an expiry of the same lease are never
// both in the log at once. Without it this interleaving is possible: a keep-alive arrives just
// before the deadline and its renewal is proposed; before it applies, the expiry check (reading
// the applied state, where the old deadline has passed) proposes a revoke; the renewal applies
// and its sender is told "renewed for TTL", then the revoke deletes the lease and its keys — and
// another worker can take the lock while the first believes it holds it. The rules:
//   - a lease whose deadline has passed on the leader's cluster clock, or whose revoke is in
//     flight, is never renewed (answered TTL = 0; expiry will revoke it);
//   - a lease with a renewal in flight is not revoked (the check runs again after it applied).
// Both sets are per leadership term: a new leader's clock starts only after every entry of
// earlier terms applied, so nothing proposed by an earlier term can still be in flight then.
//
// Threading: neither class is thread-safe. LeaseInFlight lives on the Raft driver's strand;
// LeaseManager guards its KeepAliveBatcher with a mutex of its own. Time is passed in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

// The answer to one keep-alive.
struct KeepAliveOutcome {
  // OK: answered (ttl_ms 0 = unknown or expired lease). Otherwise nothing was decided (not the
  // leader, leader changed, stopping): the client sends the keep-alive again.
  Status status;
  LeaseId id;
  std::int64_t ttl_ms = 0;  // the lease's TTL after the renewal; 0: unknown or expired
  std::int64_t deadline_cluster_ms = 0;
  // Captured when the keep-alive reached the leader, before renewing
  // (docs/etcd-compatibility.md §3.4).
  etcdserverpb::ResponseHeader header;
};
using KeepAliveCallback = std::function<void(const KeepAliveOutcome&)>;

class KeepAliveBatcher {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  struct Waiter {
    LeaseId id;
    etcdserverpb::ResponseHeader header;
    KeepAliveCallback done;
  };
  struct Batch {
    std::vector<LeaseId> ids;  // unique, in order of first arrival
    std::vector<Waiter> waiters;
  };

  // A batch is due `window` after its first keep-alive, or at once when it holds `max_ids`
  // distinct leases.
  KeepAliveBatcher(std::chrono::milliseconds window, std::size_t max_ids)
      : window_(window), max_ids_(max_ids) {}

  void Add(LeaseId id, etcdserverpb::ResponseHeader header, KeepAliveCallback done, TimePoint now);
  [[nodiscard]] bool FlushDue(TimePoint now) const;
  [[nodiscard]] bool empty() const { return waiters_.empty(); }
  [[nodiscard]] std::size_t distinct() const { return ids_.size(); }
  // Everything collected so far; the batcher is empty afterwards.
  Batch Take();

 private:
  const std::chrono::milliseconds window_;
  const std::size_t max_ids_;
  std::vector<LeaseId> ids_;     // Invariant: unique; the ids of waiters_ in first-arrival order
  std::set<LeaseId> id_set_;     // Invariant: same members as ids_
  std::vector<Waiter> waiters_;  // Invariant: empty iff ids_ empty
  TimePoint first_arrival_;      // of the oldest waiter; meaningful when !waiters_.empty()
};

enum class RenewDecision {
  kRenew,    // propose a renewal
  kUnknown,  // no such lease: TTL = 0
  kExpired,  // deadline passed or revoke in flight: TTL = 0
};

class LeaseInFlight {
 public:
  // `deadline_cluster_ms`: the lease's deadline in the applied state, nullopt if it does not
  // exist. `now_cluster_ms`: the leader's cluster clock.
  [[nodiscard]] RenewDecision Decide(LeaseId id, std::optional<std::int64_t> deadline_cluster_ms,
                                     std::int64_t now_cluster_ms) const;
  void RenewalProposed(LeaseId id);
  void RenewalDone(LeaseId id);
  // From the leases whose deadline passed (KvStore::ExpiredLeases), the ones to revoke now: no
  // renewal and no revoke of them in flight. Marks them in flight.
  std::vector<LeaseId> SelectExpiries(const std::vector<LeaseId>& expired);
  void ExpiryDone(LeaseId id);
  // A new term: forget everything (see the header comment for why that is safe).
  void Reset();

  [[nodiscard]] std::size_t renewals_in_flight() const { return renewals_.size(); }
  [[nodiscard]] std::size_t expiries_in_flight() const { return expiries_.size(); }

 private:
  std::map<LeaseId, int> renewals_;  // Invariant: every count > 0
  std::set<LeaseId> expiries_;
};

}  // namespace epoch::server
