// LeaseManager: the running side of leases on one node — the leader's cluster clock, keep-alive
// batching, expiry, and the routing of keep-alives from followers to the leader.
//
// On the leader (all on the Raft driver's strand, through the driver's hooks):
//   - every proposal is stamped with the cluster clock (ClusterClock: continues from the applied
//     cluster time once the term's first entry applied; never wall-clock, never reset), and a
//     lease grant without an ID gets a fresh unique non-zero one here, before it enters the log,
//     so applying it is deterministic;
//   - an idle leader proposes a ClockTick every clock_tick_interval;
//   - keep-alives collected during a tick window become one `lease_checkpoint` entry; a lease that
//     is unknown or past its deadline on the leader's clock is answered TTL = 0 without renewing;
//     the response header is captured once per batch when it is flushed, before renewing. A
//     keep-alive reaching the leader is added to the batch on the calling thread (no task on the
//     strand per keep-alive), and a batch's answers are delivered on a read-pool thread, so that
//     thousands of keep-alive streams cost the strand one flush per window, not one task and one
//     gRPC write per keep-alive. A follower that knows its leader forwards a keep-alive from the
//     calling thread too; only a follower without a leader, or a leader stepping down, hands it
//     to the strand;
//   - every expiry_check_interval the leader proposes a revoke for each lease whose deadline
//     passed; the state machine deletes its keys in one revision. A lease is never renewed and
//     revoked at once (LeaseInFlight explains the race this closes). A check reads only the
//     leases whose deadline may have passed, from an index ordered by deadline
//     (LeaseExpiryQueue: built by one full read of the table when the clock starts, fed by every
//     grant stamped); renewals only move deadlines later, and a due entry whose lease was renewed
//     moves to the stored deadline.
// On a follower, KeepAlive forwards each keep-alive to the leader's epoch.v1.Lease/Renew (unary,
// marked forwarded so it never takes a second hop); when no leader is known it fails at once and
// the client's next keep-alive (clientv3 resends every 500 ms until answered) tries again.
//
// The published bounds (MaxFailoverExtensionMs, MaxExtensionMs — cluster_clock.h) are exported in
// /metrics and in epoch.v1.Lease/Status and ClockStatus.
//
// Threading: KeepAlive, EstimateNowMs, Stats and the bound accessors are thread-safe. Callbacks
// run on a read-pool thread (the leader's answers), the driver's strand (failures) or a gRPC
// client thread (a forwarded keep-alive's answer), and must not block. Hooks() go to
// RaftDriver::Start(); Stop() before the driver is destroyed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "epoch/lease/cluster_clock.h"
#include "epoch/lease/lease_expiry_queue.h"
#include "epoch/lease/lease_keepalive_batcher.h"
#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/stream_slots.h"

namespace epoch::server {

class LeaseForwarder;

struct LeaseOptions {
  std::chrono::milliseconds clock_tick_interval{100};
  std::chrono::milliseconds expiry_check_interval{20};
  // Keep-alives wait at most this long (rounded up to a driver tick) to share a renewal entry.
  std::chrono::milliseconds keepalive_window{5};
  std::size_t keepalive_batch_max = 1024;
  // Revokes proposed per expiry check (the rest wait for the next check). 20 every 20 ms is
  // etcd's leaseRevokeRate, 1,000 a second: a mass expiry (a client that lost its keep-alives for
  // 30k leases) is a stream of revokes and deletes every member applies, and at 6,400 a second
  // it starved the followers' loops into elections on 2 cores.
  std::size_t revokes_per_check = 20;
  // The monotonic clock; tests substitute one they move by hand. Default: steady_clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
};

struct LeaseStats {
  std::int64_t cluster_time_ms = 0;       // EstimateNowMs()
  bool clock_running = false;             // this node leads and its clock started
  std::uint64_t keepalives = 0;           // keep-alives answered OK (any TTL)
  std::uint64_t renewal_entries = 0;      // lease_checkpoint entries committed
  std::uint64_t expired = 0;              // leases revoked by expiry
  std::uint64_t expiry_scans = 0;         // expiry checks that read the lease table
  std::uint64_t expiry_full_reads = 0;    // ... of them, reads of the whole table
  std::uint64_t expiry_visits = 0;        // leases read by the other checks
  std::uint64_t clock_ticks = 0;          // ClockTick entries committed
  std::uint64_t clock_starts = 0;         // times this node started the clock as a new leader
  std::int64_t last_start_stall_ms = -1;  // ClusterClock::last_start_stall_ms, -1 if none
  std::int64_t max_start_stall_ms = -1;
  std::uint64_t keepalive_latency_count = 0;  // leader-side, arrival to answer
  std::uint64_t keepalive_latency_sum_us = 0;
  std::uint64_t grants = 0;   // grants this member answered to its own clients
  std::uint64_t revokes = 0;  // revokes this member answered to its own clients
};

class LeaseManager {
 public:
  LeaseManager(NodeContext& node, LeaseOptions options);
  ~LeaseManager();
  LeaseManager(const LeaseManager&) = delete;
  LeaseManager& operator=(const LeaseManager&) = delete;

  // The proposal stamp and the tick hook, for RaftDriver::Start().
  [[nodiscard]] DriverHooks Hooks();
  // Fails every waiting keep-alive; later ones fail at once.
  void Stop();

  // Renews lease `id` (leader: batched; follower: forwarded unless `forwarded`, then "not
  // leader"). `done` gets the outcome exactly once.
  void KeepAlive(LeaseId id, bool forwarded, KeepAliveCallback done);

  // The best local estimate of the cluster time now (ClusterClock::Estimate).
  [[nodiscard]] std::int64_t EstimateNowMs() const;
  [[nodiscard]] LeaseStats Stats() const;
  // A keep-alive stream was ended for not reading its answers (--keepalive-queue-max).
  void NoteKeepAliveStreamCut() { keepalive_streams_cut_.fetch_add(1); }
  // Admission of keep-alive streams (--max-keepalive-streams, --max-keepalive-streams-per-address).
  [[nodiscard]] StreamSlots& keepalive_slots() { return keepalive_slots_; }
  // Prometheus text for /metrics: the counters of LeaseStats, the cluster clock and the bounds.
  void RenderMetrics(MetricsText& m) const;
  // The services count the grants and revokes they answer (not those forwarded to them, which the
  // forwarding member counts).
  void CountGrant();
  void CountRevoke();
  [[nodiscard]] ClockTiming timing() const;
  // A cluster timing change this member adopted: the bounds and the smallest TTL follow it.
  void SetRaftTiming(const raft::Timing& timing);
  [[nodiscard]] std::int64_t MaxFailoverExtensionMs() const;
  [[nodiscard]] std::int64_t MaxExtensionMs(std::int64_t ttl_ms) const;
  // Smallest TTL granted (etcd's minLeaseTTL: 1.5 election floors); shorter requests are raised.
  [[nodiscard]] std::int64_t MinTtlMs() const;

 private:
  using TimePoint = std::chrono::steady_clock::time_point;

  [[nodiscard]] TimePoint Now() const;
  // Adds to the batch when this node leads (any thread); false when it does not, or stopped
  // (then `done` was not called and is still the caller's).
  bool AddToBatch(LeaseId id, KeepAliveCallback& done);
  // --- strand only ---
  void StampProposal(v1::InternalRequest& request);
  void OnTick();
  void ObserveLeadership(TimePoint now);
  void LeaveLeadership(const Status& reason);
  void KeepAliveOnStrand(LeaseId id, bool forwarded, KeepAliveCallback done);
  void FlushKeepAlives(TimePoint now);
  // Fails every keep-alive in the batch with `reason` (leadership lost, stopping).
  void FailWaiting(const Status& reason);
  // Runs the answers of one batch on a read-pool thread (inline once stopped).
  void Deliver(std::vector<std::pair<KeepAliveCallback, KeepAliveOutcome>> answers);
  void ProposeRenewals(std::vector<LeaseId> ids, std::vector<KeepAliveBatcher::Waiter> waiters);
  void CheckExpiry(TimePoint now);
  void RebuildExpiries();
  void MaybeProposeClockTick(TimePoint now);
  LeaseId ChooseLeaseId();
  void Publish();
  [[nodiscard]] etcdserverpb::ResponseHeader CaptureHeader() const;
  void Forward(LeaseId id, KeepAliveCallback done);
  // Whether Stop() has not closed the keep-alive intake yet.
  bool IntakeOpen();

  NodeContext& node_;
  const LeaseOptions options_;
  mutable std::mutex timing_mu_;
  ClockTiming timing_;  // guarded by timing_mu_
  std::unique_ptr<LeaseForwarder> forwarder_;

  // Any thread: the keep-alives waiting for the next flush. Added to where they arrive (on the
  // leader); taken on the strand.
  std::mutex batch_mu_;
  KeepAliveBatcher batcher_;        // guarded by batch_mu_
  bool intake_stopped_ = false;     // guarded by batch_mu_: Stop() ran
  bool full_flush_posted_ = false;  // guarded by batch_mu_: a full batch's flush is queued

  // --- Strand-only state. ---
  bool stopped_ = false;
  ClusterClock clock_;
  LeaseInFlight in_flight_;
  // Bumped on every change of leadership; callbacks of proposals from an older generation do not
  // touch in_flight_ (it was reset).
  std::uint64_t generation_ = 0;
  bool clock_tick_in_flight_ = false;
  TimePoint next_expiry_check_;
  // A lower bound of the deadline of every lease in the table, once rebuilt after the clock
  // started; until then (rebuild_expiries_) the next check reads the whole table.
  LeaseExpiryQueue expiries_;
  bool rebuild_expiries_ = true;
  std::mt19937_64 id_rng_;

  // Published for other threads.
  std::atomic<std::uint64_t> keepalive_streams_cut_{0};
  StreamSlots keepalive_slots_;
  mutable std::mutex mu_;
  ClusterClock published_clock_;  // guarded by mu_: a copy of clock_ after each tick
  LeaseStats stats_;              // guarded by mu_ (cluster_time_ms filled by Stats())
};

}  // namespace epoch::server
