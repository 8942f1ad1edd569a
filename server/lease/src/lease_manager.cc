#include "epoch/lease/lease_manager.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/post.hpp>
#include <utility>

#include "epoch/etcd_errors.h"
#include "epoch/peer/lease_forwarder.h"

namespace epoch::server {
namespace {

ClockTiming TimingFor(const NodeConfig& config, const LeaseOptions& options) {
  ClockTiming t;
  t.tick = config.tick;
  t.election_timeout_min_ticks = config.raft.election_timeout_min_ticks;
  t.max_election_timeout_ticks = config.raft.max_election_timeout_ticks;
  t.election_jitter_ticks = config.raft.election_jitter_ticks;
  t.max_clock_drift = config.raft.max_clock_drift;
  t.clock_tick_interval = options.clock_tick_interval;
  t.expiry_check_interval = options.expiry_check_interval;
  return t;
}

Status LeaderChanged() { return etcd_errors::kLeaderChanged.ToStatus(); }

std::uint64_t SeedFor(NodeId id) {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device() ^ id.value();
}

// How long a forwarded keep-alive may take before the client's next one replaces it.
constexpr auto kForwardTimeout = std::chrono::seconds(2);

}  // namespace

LeaseManager::LeaseManager(NodeContext& node, LeaseOptions options)
    : node_(node),
      options_(std::move(options)),
      timing_(TimingFor(node.config(), options_)),
      forwarder_(std::make_unique<LeaseForwarder>(
          node.client_queue(), [&node](NodeId id) { return node.ClientUrlOf(id); },
          node.member_credentials())),
      batcher_(options_.keepalive_window, options_.keepalive_batch_max),
      id_rng_(SeedFor(node.config().self_id())),
      keepalive_slots_(node.config().keepalive_streams_max,
                       node.config().keepalive_streams_per_address_max) {}

LeaseManager::~LeaseManager() = default;

DriverHooks LeaseManager::Hooks() {
  DriverHooks hooks;
  hooks.stamp = [this](v1::InternalRequest& r) { StampProposal(r); };
  hooks.on_tick = [this] { OnTick(); };
  return hooks;
}

void LeaseManager::Stop() {
  {
    std::lock_guard lock(batch_mu_);
    intake_stopped_ = true;
  }
  node_.driver().Post([this] {
    stopped_ = true;
    LeaveLeadership(etcd_errors::kStopped.ToStatus());
  });
}

LeaseManager::TimePoint LeaseManager::Now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

std::int64_t LeaseManager::EstimateNowMs() const {
  std::lock_guard lock(mu_);
  return published_clock_.Estimate(Now(), 2 * timing().clock_tick_interval);
}

LeaseStats LeaseManager::Stats() const {
  LeaseStats s;
  {
    std::lock_guard lock(mu_);
    s = stats_;
  }
  s.cluster_time_ms = EstimateNowMs();
  return s;
}

void LeaseManager::RenderMetrics(MetricsText& m) const {
  const LeaseStats s = Stats();
  // Prometheus' base unit: seconds (the clock itself counts milliseconds).
  const auto seconds = [](std::int64_t ms) { return static_cast<double>(ms) / 1000.0; };
  m.Gauge("epoch_cluster_time_seconds", "This member's estimate of the cluster clock.",
          seconds(s.cluster_time_ms));
  m.Gauge("epoch_cluster_clock_running", "1 if this member leads and its clock runs.",
          s.clock_running ? 1 : 0);
  m.Gauge("epoch_lease_max_failover_extension_seconds",
          "Published bound on the cluster time lost in one leader failover.",
          seconds(MaxFailoverExtensionMs()));
  m.Gauge("epoch_cluster_clock_last_start_stall_seconds",
          "Cluster time that stood still before this member last started the clock (-1: never).",
          s.last_start_stall_ms < 0 ? -1.0 : seconds(s.last_start_stall_ms));
  m.Gauge("epoch_cluster_clock_max_start_stall_seconds",
          "Largest such stall seen by this member (-1: never).",
          s.max_start_stall_ms < 0 ? -1.0 : seconds(s.max_start_stall_ms));
  m.Counter("epoch_cluster_clock_starts_total", "Times this member started the clock.",
            s.clock_starts);
  m.Counter("epoch_cluster_clock_ticks_total", "ClockTick entries committed.", s.clock_ticks);
  m.Counter("epoch_lease_keepalives_total", "Keep-alives answered by this leader.", s.keepalives);
  m.Counter("epoch_lease_keepalive_streams_cut_total",
            "Keep-alive streams ended for not reading their answers (--keepalive-queue-max).",
            keepalive_streams_cut_.load());
  keepalive_slots_.RenderMetrics(m, "epoch_lease_keepalive_streams", "Keep-alive streams");
  m.Counter("epoch_lease_renewal_entries_total",
            "Batched renewal (lease_checkpoint) entries committed.", s.renewal_entries);
  m.Counter("epoch_leases_expired_total", "Leases revoked by expiry.", s.expired);
  m.Counter("epoch_lease_expiry_visits_total",
            "Leases read by expiry checks (only those whose deadline may have passed).",
            s.expiry_visits);
  m.Counter("epoch_lease_expiry_full_reads_total",
            "Reads of the whole lease table by the expiry check (once per leadership).",
            s.expiry_full_reads);
  m.Counter("epoch_leases_granted_total", "Lease grants answered to this member's clients.",
            s.grants);
  m.Counter("epoch_leases_revoked_total", "Lease revokes answered to this member's clients.",
            s.revokes);
  m.Summary("epoch_lease_keepalive_seconds",
            "Keep-alive latency on the leader (arrival to answer).",
            static_cast<double>(s.keepalive_latency_sum_us) / 1e6, s.keepalive_latency_count);
}

void LeaseManager::CountGrant() {
  std::lock_guard lock(mu_);
  ++stats_.grants;
}

void LeaseManager::CountRevoke() {
  std::lock_guard lock(mu_);
  ++stats_.revokes;
}

std::int64_t LeaseManager::MaxFailoverExtensionMs() const {
  return server::MaxFailoverExtensionMs(timing());
}

std::int64_t LeaseManager::MaxExtensionMs(std::int64_t ttl_ms) const {
  return server::MaxExtensionMs(timing(), ttl_ms);
}

ClockTiming LeaseManager::timing() const {
  std::lock_guard lock(timing_mu_);
  return timing_;
}

void LeaseManager::SetRaftTiming(const raft::Timing& timing) {
  std::lock_guard lock(timing_mu_);
  timing_.election_timeout_min_ticks = timing.election_timeout_min_ticks;
  timing_.max_election_timeout_ticks = timing.max_election_timeout_ticks;
  timing_.election_jitter_ticks = timing.election_jitter_ticks;
  timing_.max_clock_drift = timing.max_clock_drift;
}

std::int64_t LeaseManager::MinTtlMs() const {
  // etcd: minTTL = 3/2 election timeouts (lessor.go), so a lease outlives a normal election.
  const ClockTiming t = timing();
  return 3 * t.election_timeout_min_ticks * t.tick.count() / 2;
}

// --- strand ---------------------------------------------------------------------------------

void LeaseManager::StampProposal(v1::InternalRequest& request) {
  const TimePoint now = Now();
  const std::int64_t stamp = clock_.Stamp(now);
  request.set_cluster_time_ms(stamp);
  if (!request.has_lease_grant()) return;
  if (request.lease_grant().id() == 0) {
    request.mutable_lease_grant()->set_id(ChooseLeaseId().value());
  }
  // Applied, this grant's deadline is the applied cluster time then plus the TTL: at least the
  // stamp, or (unstamped, before this leader's clock runs) at least the applied time now. The
  // full read at clock start may come before this grant applies, so it is scheduled either way.
  const std::int64_t floor_ms = stamp > 0 ? stamp : node_.store().ClusterTimeMs();
  expiries_.Schedule(LeaseId(request.lease_grant().id()),
                     floor_ms + request.lease_grant().ttl_ms());
}

LeaseId LeaseManager::ChooseLeaseId() {
  // Positive 63-bit random IDs (etcd's are positive too), unused in the applied state. Two grants
  // racing to the same unapplied ID would need a 2^-63 coincidence; the loser would get etcd's
  // "lease already exists", never a shared lease.
  for (;;) {
    LeaseId id(static_cast<std::int64_t>(id_rng_() >> 1));
    if (id.value() == 0) continue;
    Result<std::optional<LeaseInfo>> existing = node_.store().GetLease(id);
    if (existing.ok() && existing->has_value()) continue;
    return id;
  }
}

void LeaseManager::OnTick() {
  if (stopped_) return;
  const TimePoint now = Now();
  ObserveLeadership(now);
  // A keep-alive can join the batch just after leadership was lost (it read the status before
  // the step-down): nothing would flush it.
  if (!clock_.leading()) FailWaiting(LeaderChanged());
  if (clock_.running()) {
    FlushKeepAlives(now);
    if (now >= next_expiry_check_) {
      next_expiry_check_ = now + options_.expiry_check_interval;
      CheckExpiry(now);
    }
    MaybeProposeClockTick(now);
  }
  Publish();
}

void LeaseManager::ObserveLeadership(TimePoint now) {
  const DriverStatus status = node_.driver().status();
  const bool leader = status.role == raft::Role::kLeader;
  if (clock_.leading() && (!leader || clock_.term() != status.term)) {
    LeaveLeadership(LeaderChanged());
  }
  if (leader && !clock_.leading()) {
    // The term's no-op was appended when the core became leader, before this status was
    // published, so it is at or below status.last_index.
    clock_.BecomeLeader(status.term, status.last_index);
    in_flight_.Reset();
    ++generation_;
    clock_tick_in_flight_ = false;
  }
  KvStore& store = node_.store();
  if (clock_.MaybeStart(store.AppliedIndex(), store.ClusterTimeMs(), now)) {
    next_expiry_check_ = now;
    rebuild_expiries_ = true;
    std::optional<std::int64_t> stall = clock_.last_start_stall_ms();
    spdlog::info("node={:x} term={} cluster clock starts at {} ms (stood still {} ms)",
                 node_.config().self_id(), status.term, store.ClusterTimeMs(), stall ? *stall : -1);
    std::lock_guard lock(mu_);
    ++stats_.clock_starts;
    if (stall) {
      stats_.last_start_stall_ms = *stall;
      stats_.max_start_stall_ms = std::max(stats_.max_start_stall_ms, *stall);
    }
  }
  clock_.ObserveApplied(store.ClusterTimeMs(), now);
}

void LeaseManager::LeaveLeadership(const Status& reason) {
  if (clock_.leading()) clock_.StepDown();
  in_flight_.Reset();
  ++generation_;
  expiries_.Clear();
  rebuild_expiries_ = true;
  FailWaiting(reason);
}

void LeaseManager::FailWaiting(const Status& reason) {
  KeepAliveBatcher::Batch batch;
  {
    std::lock_guard lock(batch_mu_);
    if (batcher_.empty()) return;
    batch = batcher_.Take();
  }
  std::vector<std::pair<KeepAliveCallback, KeepAliveOutcome>> answers;
  answers.reserve(batch.waiters.size());
  for (auto& w : batch.waiters) {
    KeepAliveOutcome out;
    out.status = reason;
    out.id = w.id;
    answers.emplace_back(std::move(w.done), std::move(out));
  }
  Deliver(std::move(answers));
}

void LeaseManager::Deliver(std::vector<std::pair<KeepAliveCallback, KeepAliveOutcome>> answers) {
  if (answers.empty()) return;
  auto run = [answers = std::move(answers)]() mutable {
    for (auto& [done, out] : answers) done(out);
  };
  // Stopping: the read pool may already be joined.
  if (stopped_) return run();
  asio::post(node_.read_pool(), std::move(run));
}

void LeaseManager::Publish() {
  std::lock_guard lock(mu_);
  published_clock_ = clock_;
  stats_.clock_running = clock_.running();
}

etcdserverpb::ResponseHeader LeaseManager::CaptureHeader() const {
  etcdserverpb::ResponseHeader header;
  node_.FillHeader(&header);
  return header;
}

void LeaseManager::KeepAlive(LeaseId id, bool forwarded, KeepAliveCallback done) {
  if (AddToBatch(id, done)) return;
  // A follower that knows its leader forwards from the caller's thread: a task on the Raft
  // strand per keep-alive (20,000 a second for 100k leases) starved the followers' loops. The
  // forwarder is thread-safe; a leader that changes meanwhile answers "not leader", as it would
  // after the strand's look.
  const DriverStatus status = node_.driver().status();
  if (!forwarded && status.role != raft::Role::kLeader && status.leader != raft::kNoNode &&
      IntakeOpen()) {
    return Forward(id, std::move(done));
  }
  node_.driver().Post([this, id, forwarded, done = std::move(done)]() mutable {
    KeepAliveOnStrand(id, forwarded, std::move(done));
  });
}

bool LeaseManager::AddToBatch(LeaseId id, KeepAliveCallback& done) {
  if (node_.driver().status().role != raft::Role::kLeader) return false;
  const TimePoint arrived = Now();
  auto timed = [this, arrived, done = std::move(done)](const KeepAliveOutcome& out) {
    if (out.status.ok()) {
      auto us = std::chrono::duration_cast<std::chrono::microseconds>(Now() - arrived).count();
      std::lock_guard lock(mu_);
      ++stats_.keepalives;
      ++stats_.keepalive_latency_count;
      stats_.keepalive_latency_sum_us += static_cast<std::uint64_t>(std::max<std::int64_t>(0, us));
    }
    done(out);
  };
  bool post_flush = false;
  {
    std::lock_guard lock(batch_mu_);
    if (intake_stopped_) {
      done = std::move(timed);  // handed back: the strand answers "stopped"
      return false;
    }
    batcher_.Add(id, {}, std::move(timed), arrived);
    // A full batch goes out at once; otherwise the next tick flushes it (once the clock runs).
    if (batcher_.FlushDue(arrived) && !full_flush_posted_) {
      full_flush_posted_ = post_flush = true;
    }
  }
  if (post_flush) {
    node_.driver().Post([this] {
      {
        std::lock_guard lock(batch_mu_);
        full_flush_posted_ = false;
      }
      if (!stopped_ && clock_.running()) FlushKeepAlives(Now());
    });
  }
  return true;
}

void LeaseManager::KeepAliveOnStrand(LeaseId id, bool forwarded, KeepAliveCallback done) {
  KeepAliveOutcome fail;
  fail.id = id;
  if (stopped_) {
    fail.status = etcd_errors::kStopped.ToStatus();
    return done(fail);
  }
  // Leadership may have been won since the caller looked.
  if (AddToBatch(id, done)) return;
  const DriverStatus status = node_.driver().status();
  if (status.role == raft::Role::kLeader) {  // the leader refused it: stopping
    fail.status = etcd_errors::kStopped.ToStatus();
    return done(fail);
  }
  if (forwarded || status.leader == raft::kNoNode) {
    fail.status =
        forwarded ? etcd_errors::kNotLeader.ToStatus() : etcd_errors::kNoLeader.ToStatus();
    return done(fail);
  }
  Forward(id, std::move(done));
}

bool LeaseManager::IntakeOpen() {
  std::lock_guard lock(batch_mu_);
  return !intake_stopped_;
}

void LeaseManager::Forward(LeaseId id, KeepAliveCallback done) {
  const NodeId leader = node_.driver().status().leader;
  forwarder_->Renew(
      leader, id, std::chrono::system_clock::now() + kForwardTimeout,
      [id, done = std::move(done)](const Status& s, const v1::LeaseKeepAliveResponse& r) {
        KeepAliveOutcome out;
        out.status = s;
        out.id = id;
        if (s.ok()) {
          out.ttl_ms = r.ttl_ms();
          out.deadline_cluster_ms = r.deadline_cluster_ms();
          out.header = r.header();
        }
        done(out);
      });
}

void LeaseManager::FlushKeepAlives(TimePoint now) {
  KeepAliveBatcher::Batch batch;
  {
    std::lock_guard lock(batch_mu_);
    if (!batcher_.FlushDue(now)) return;
    batch = batcher_.Take();
  }
  // Header first, once for the batch: the renewal must not be visible in it
  // (docs/etcd-compatibility.md §3.4).
  const etcdserverpb::ResponseHeader header = CaptureHeader();
  for (auto& w : batch.waiters) w.header = header;
  const std::int64_t now_cluster_ms = clock_.Now(now);
  // One decision per lease; a storage error leaves its keep-alives unanswered (the client retries).
  std::map<LeaseId, Result<RenewDecision>> decisions;
  std::vector<LeaseId> renew_ids;
  for (LeaseId id : batch.ids) {
    Result<std::optional<LeaseInfo>> info = node_.store().GetLease(id);
    if (!info.ok()) {
      decisions.emplace(id, info.status());
      continue;
    }
    std::optional<std::int64_t> deadline;
    if (info->has_value()) deadline = (*info)->deadline_cluster_ms;
    RenewDecision d = in_flight_.Decide(id, deadline, now_cluster_ms);
    decisions.emplace(id, d);
    if (d == RenewDecision::kRenew) renew_ids.push_back(id);
  }
  std::vector<KeepAliveBatcher::Waiter> waiting;
  std::vector<std::pair<KeepAliveCallback, KeepAliveOutcome>> answers;
  for (auto& w : batch.waiters) {
    const Result<RenewDecision>& d = decisions.at(w.id);
    if (d.ok() && *d == RenewDecision::kRenew) {
      waiting.push_back(std::move(w));
      continue;
    }
    KeepAliveOutcome out;  // unknown or expired: TTL 0 (etcd's answer)
    out.status = d.status();
    out.id = w.id;
    out.header = w.header;
    answers.emplace_back(std::move(w.done), std::move(out));
  }
  Deliver(std::move(answers));
  if (!renew_ids.empty()) ProposeRenewals(std::move(renew_ids), std::move(waiting));
}

void LeaseManager::ProposeRenewals(std::vector<LeaseId> ids,
                                   std::vector<KeepAliveBatcher::Waiter> waiters) {
  v1::InternalRequest request;
  for (LeaseId id : ids) {
    request.mutable_lease_checkpoint()->add_ids(id.value());
    in_flight_.RenewalProposed(id);
  }
  auto shared = std::make_shared<std::vector<KeepAliveBatcher::Waiter>>(std::move(waiters));
  node_.driver().Propose(
      std::move(request), [this, ids = std::move(ids), shared, generation = generation_](
                              const Status& s, const v1::InternalResponse& r) {
        if (generation == generation_) {
          for (LeaseId id : ids) in_flight_.RenewalDone(id);
        }
        std::map<LeaseId, std::pair<std::int64_t, std::int64_t>> results;  // ttl, deadline
        if (s.ok()) {
          for (const auto& result : r.lease_checkpoint().results()) {
            results[LeaseId(result.id())] = {result.ttl_ms(), result.deadline_cluster_ms()};
          }
          std::lock_guard lock(mu_);
          ++stats_.renewal_entries;
        }
        std::vector<std::pair<KeepAliveCallback, KeepAliveOutcome>> answers;
        answers.reserve(shared->size());
        for (auto& w : *shared) {
          KeepAliveOutcome out;
          out.status = s;
          out.id = w.id;
          out.header = std::move(w.header);
          auto it = results.find(w.id);
          // Absent from the results: revoked between the check and the apply; TTL 0.
          if (it != results.end()) {
            out.ttl_ms = it->second.first;
            out.deadline_cluster_ms = it->second.second;
          }
          answers.emplace_back(std::move(w.done), std::move(out));
        }
        Deliver(std::move(answers));
      });
}

void LeaseManager::RebuildExpiries() {
  Result<std::vector<LeaseInfo>> leases = node_.store().Leases();
  {
    std::lock_guard lock(mu_);
    ++stats_.expiry_scans;
    ++stats_.expiry_full_reads;
  }
  if (!leases.ok()) {
    spdlog::error("node={:x} lease expiry check: {}", node_.config().self_id(),
                  leases.status().ToString());
    return;  // rebuild_expiries_ stays set: the next check reads again
  }
  // Merged, not replacing: grants scheduled since this leader's term began may not be applied yet.
  for (const LeaseInfo& l : *leases) expiries_.Schedule(l.id, l.deadline_cluster_ms);
  rebuild_expiries_ = false;
}

void LeaseManager::CheckExpiry(TimePoint now) {
  const std::int64_t now_cluster_ms = clock_.Now(now);
  if (rebuild_expiries_) RebuildExpiries();
  if (rebuild_expiries_) return;
  std::optional<std::int64_t> earliest = expiries_.Earliest();
  if (!earliest || *earliest > now_cluster_ms) return;  // no deadline can have passed
  KvStore& store = node_.store();
  LeaseExpiryQueue::Due due =
      expiries_.CollectExpired(now_cluster_ms, options_.revokes_per_check,
                               [&store](LeaseId id) -> Result<std::optional<std::int64_t>> {
                                 Result<std::optional<LeaseInfo>> lease = store.GetLease(id);
                                 if (!lease.ok()) return lease.status();
                                 if (!lease->has_value()) return std::optional<std::int64_t>();
                                 return std::optional<std::int64_t>((*lease)->deadline_cluster_ms);
                               });
  {
    std::lock_guard lock(mu_);
    ++stats_.expiry_scans;
    stats_.expiry_visits += due.visited;
  }
  if (!due.status.ok()) {
    spdlog::error("node={:x} lease expiry check: {}", node_.config().self_id(),
                  due.status.ToString());
  }
  // Expired leases this check does not revoke (over the cap, a renewal or revoke in flight) keep
  // their due entries: the next check looks at them again.
  std::vector<LeaseId> selected = in_flight_.SelectExpiries(due.expired);
  for (LeaseId id : selected) {
    v1::InternalRequest request;
    request.mutable_lease_revoke()->set_id(id.value());
    node_.driver().Propose(std::move(request), [this, id, generation = generation_](
                                                   const Status& s, const v1::InternalResponse&) {
      // Not revoked (a dropped proposal): its entry is still due, the next check retries.
      if (generation == generation_) in_flight_.ExpiryDone(id);
      if (s.ok()) {
        std::lock_guard lock(mu_);
        ++stats_.expired;
      }
    });
  }
}

void LeaseManager::MaybeProposeClockTick(TimePoint now) {
  if (clock_tick_in_flight_ || !clock_.TickDue(now, options_.clock_tick_interval)) return;
  clock_tick_in_flight_ = true;
  v1::InternalRequest request;
  request.mutable_clock_tick();
  node_.driver().Propose(std::move(request), [this, generation = generation_](
                                                 const Status& s, const v1::InternalResponse&) {
    if (generation == generation_) clock_tick_in_flight_ = false;
    if (s.ok()) {
      std::lock_guard lock(mu_);
      ++stats_.clock_ticks;
    }
  });
}

}  // namespace epoch::server
