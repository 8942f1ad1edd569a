#include "epoch/chaos/faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <numeric>
#include <thread>

#include "epoch/client/admin.h"

namespace epoch::chaos {
namespace {

using std::chrono::milliseconds;

milliseconds Between(std::mt19937_64& rng, int lo_ms, int hi_ms) {
  return milliseconds(std::uniform_int_distribution<int>(lo_ms, hi_ms)(rng));
}

// Holding a fault is the fault itself, not a wait for a condition.
void Hold(milliseconds d) { std::this_thread::sleep_for(d); }

int RandomOther(std::mt19937_64& rng, int n, int not_this) {
  int k = std::uniform_int_distribution<int>(0, n - 2)(rng);
  return k >= not_this ? k + 1 : k;
}

// Time from now until the first successful Put through `prober`, bounded. `attempts` gets one
// line per Put attempt (start and end relative to the kill, outcome), for slow-failover evidence.
Result<double> MeasureFailover(client::Client& prober, std::chrono::steady_clock::time_point t0,
                               std::string* attempts) {
  auto since = [t0] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  auto deadline = t0 + std::chrono::seconds(15);
  for (int attempt = 0; std::chrono::steady_clock::now() < deadline && attempt < 10'000;
       ++attempt) {
    client::CallOptions call;
    call.timeout = milliseconds(1000);
    double start = since();
    auto r = prober.Put("/failover/probe", std::to_string(attempt), LeaseId(0), call);
    *attempts += fmt::format("  attempt {}: +{:.1f} ms .. +{:.1f} ms: {}\n", attempt, start,
                             since(), r.ok() ? std::string("ok") : r.status().ToString());
    if (r.ok()) return since();
  }
  return Status::Timeout("no write succeeded within 15 s of the leader kill");
}

// A failover slower than the p99 target (450 ms) keeps every node's log tail next to the
// cluster directory (which is removed when the round passes), for an engineer to read.
constexpr double kSlowFailoverMs = 450;

void KeepSlowFailoverLogs(test::TestCluster& tc, int killed, double ms,
                          std::chrono::system_clock::time_point killed_at,
                          const std::string& attempts) {
  static int count = 0;
  std::string path = fmt::format("{}-slow-failover-{}.log", tc.dir(), ++count);
  std::ofstream out(path);
  auto since_epoch_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(killed_at.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(since_epoch_ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  out << fmt::format(
      "leader n{} SIGKILLed at {:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03} (UTC, as in the node "
      "logs); "
      "first successful write after {:.1f} ms\n",
      killed + 1, utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
      utc.tm_sec, since_epoch_ms % 1000, ms);
  out << "client attempts (times relative to the kill):\n" << attempts;
  for (int i = 0; i < tc.size(); ++i) {
    out << fmt::format("==== n{} (log tail) ====\n", i + 1) << tc.LogTail(i, 16384) << "\n";
  }
  fmt::print("slow failover ({:.1f} ms): node log tails kept in {}\n", ms, path);
}

Result<std::string> KillLeader(FaultContext& ctx, int leader) {
  test::TestCluster& tc = ctx.cluster.nodes();
  // Warm the prober: its first write after the kill must not pay for a first connection.
  (void)ctx.prober.Put("/failover/warm", "1");
  auto wall0 = std::chrono::system_clock::now();
  auto t0 = std::chrono::steady_clock::now();
  // The client writes from the moment of the kill, as a real one would; reaping the dead process
  // comes after. (Kill() first made the probe wait for the kernel to tear the process down — up
  // to 1.3 s on a loaded machine — and counted that wait as failover.)
  tc.SendKill(leader);
  std::string attempts;
  auto ms = MeasureFailover(ctx.prober, t0, &attempts);
  tc.Kill(leader);
  Status restarted = tc.StartNode(leader);
  if (!restarted.ok()) return restarted;
  if (!ms.ok()) return ms.status().Annotate(fmt::format("kill n{} (leader)", leader + 1));
  ctx.failover_ms.push_back(*ms);
  if (*ms > kSlowFailoverMs) KeepSlowFailoverLogs(tc, leader, *ms, wall0, attempts);
  return fmt::format("SIGKILL n{} (leader), first write after {:.1f} ms, restarted", leader + 1,
                     *ms);
}

// Cuts (or degrades) every peer link of `node` in the chosen directions.
void SetNodeLinks(ProxyNet& net, int node, LinkFault f, bool out, bool in) {
  for (int j = 0; j < net.nodes(); ++j) {
    if (j == node) continue;
    if (out) net.Set(node, j, f);
    if (in) net.Set(j, node, f);
  }
}

std::string Ring(ProxyNet& net, std::mt19937_64& rng) {
  int n = net.nodes();
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::string cut;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      int dist = std::min(b - a, n - (b - a));
      // 3 nodes: cut one pair (each node still sees a majority); 5+: keep ring neighbours only.
      bool keep = n == 3 ? !(a == 0 && b == 2) : dist == 1;
      if (keep) continue;
      net.SetPair(order[static_cast<std::size_t>(a)], order[static_cast<std::size_t>(b)],
                  LinkFault::Cut());
      cut += fmt::format(" n{}-n{}", order[static_cast<std::size_t>(a)] + 1,
                         order[static_cast<std::size_t>(b)] + 1);
    }
  }
  return "majorities ring, cut:" + cut;
}

Result<std::string> Partition(FaultKind kind, FaultContext& ctx, int leader) {
  ProxyNet& net = ctx.cluster.net();
  int n = ctx.cluster.size();
  int node = std::uniform_int_distribution<int>(0, n - 1)(ctx.rng);
  milliseconds hold = Between(ctx.rng, 400, 2000);
  std::string what;
  switch (kind) {
    case FaultKind::kPartitionNode:
      SetNodeLinks(net, node, LinkFault::Cut(), true, true);
      what = fmt::format("n{} cut from all peers", node + 1);
      break;
    case FaultKind::kPartitionOneWay: {
      bool out = std::uniform_int_distribution<int>(0, 1)(ctx.rng) == 1;
      SetNodeLinks(net, node, LinkFault::Cut(), out, !out);
      what = fmt::format("n{} {} links cut (one way)", node + 1, out ? "outgoing" : "incoming");
      break;
    }
    case FaultKind::kPartitionRing: what = Ring(net, ctx.rng); break;
    case FaultKind::kIsolateLeader:
      SetNodeLinks(net, leader, LinkFault::Cut(), true, true);
      what = fmt::format("leader n{} cut from its peers, clients still reach it", leader + 1);
      break;
    case FaultKind::kLinkDelay: {
      milliseconds d = Between(ctx.rng, 20, 150);
      SetNodeLinks(net, node, LinkFault::Delay(d), true, true);
      what = fmt::format("n{} peer links delayed {} ms", node + 1, d.count());
      break;
    }
    default: {
      double p = std::uniform_real_distribution<double>(0.02, 0.15)(ctx.rng);
      SetNodeLinks(net, node, LinkFault::Drop(p), true, true);
      what = fmt::format("n{} peer links drop p={:.2f}", node + 1, p);
      break;
    }
  }
  Hold(hold);
  net.HealAll();
  return fmt::format("{} for {} ms, healed", what, hold.count());
}

Result<std::string> Pause(FaultContext& ctx, int node, bool is_leader) {
  milliseconds hold = Between(ctx.rng, 300, 1500);
  ctx.cluster.nodes().Pause(node);
  Hold(hold);
  ctx.cluster.nodes().Resume(node);
  return fmt::format("SIGSTOP n{} ({}) for {} ms, SIGCONT", node + 1,
                     is_leader ? "leader" : "follower", hold.count());
}

Result<std::string> Disk(FaultContext& ctx, int leader, bool stall) {
  milliseconds hold = Between(ctx.rng, 500, 2000);
  std::string query =
      stall ? "stall=1" : fmt::format("sync_delay_ms={}", Between(ctx.rng, 50, 400).count());
  EPOCH_RETURN_IF_ERROR(ctx.cluster.Disk(leader, query));
  Hold(hold);
  EPOCH_RETURN_IF_ERROR(ctx.cluster.Disk(leader, "clear=1"));
  return fmt::format("leader n{} WAL {} for {} ms, cleared", leader + 1, query, hold.count());
}

std::int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// While worker `w` is paused: its lease's keys must be gone by the lease's deadline plus the
// published bound (docs/timing-and-safety.md §7). Asks Lease/Status for the deadline, the bound
// and the attached keys 100 ms into the pause (so renewals the worker sent just before it have
// landed), waits until that instant — extending the pause if it would end first — and reads
// each key. Returns how long the pause must still last; appends one observation per key read.
milliseconds WatchPausedLease(FaultContext& ctx, int w, LeaseId lease,
                              std::chrono::steady_clock::time_point paused_at,
                              std::chrono::steady_clock::time_point pause_ends, std::string* what) {
  auto left = [pause_ends] {
    return std::chrono::duration_cast<milliseconds>(std::max(
        pause_ends - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0)));
  };
  Hold(milliseconds(100));
  client::CallOptions call;
  call.timeout = milliseconds(1000);
  Result<v1::LeaseStatusResponse> status = client::LeaseStatus(ctx.prober, lease, true, call);
  const std::int64_t answered = MonotonicNs();
  if (!status.ok() || !status->found() || status->keys().empty()) {
    *what = !status.ok()       ? ", lease status unknown"
            : !status->found() ? fmt::format(", lease {:x} already gone", lease.value())
                               : fmt::format(", lease {:x} holds no key", lease.value());
    return left();
  }
  LeaseObservation o;
  o.worker = w + 1;
  o.lease = lease.value();
  o.status_returned_ns = answered;
  o.remaining_ttl_ms = status->remaining_ttl_ms();
  o.max_extension_ms = status->max_extension_ms();
  const std::int64_t wait_ns = LeaseGoneByNs(o) - MonotonicNs();
  // Bounded: the TTL is 1 s and the bound about 1.3 s at the chaos timing.
  if (wait_ns > std::chrono::nanoseconds(std::chrono::seconds(10)).count()) {
    *what = fmt::format(", lease deadline + bound {} ms away: not checked", wait_ns / 1'000'000);
    return left();
  }
  if (wait_ns > 0) {
    Hold(std::chrono::duration_cast<milliseconds>(std::chrono::nanoseconds(wait_ns)) +
         milliseconds(1));
  }
  const auto read_at = std::chrono::steady_clock::now();
  int seen = 0;
  for (const v1::LeaseKey& k : status->keys()) {
    LeaseObservation ko = o;
    ko.key = k.key();
    ko.read_sent_ns = MonotonicNs();
    Result<std::optional<mvccpb::KeyValue>> kv = ctx.prober.Get(ko.key, call);
    if (!kv.ok()) continue;  // unknown: no observation
    ko.key_seen = kv->has_value() && (*kv)->lease() == o.lease;
    if (ko.key_seen) ko.seen_create_revision = (*kv)->create_revision();
    seen += ko.key_seen ? 1 : 0;
    ctx.lease_checks.push_back(ko);
  }
  *what = fmt::format(
      ", {} key(s) of lease {:x} read {} ms into the pause (deadline + bound passed), {} still "
      "there",
      status->keys_size(), o.lease,
      std::chrono::duration_cast<milliseconds>(read_at - paused_at).count(), seen);
  return left();
}

Result<std::string> PauseWorker(FaultContext& ctx) {
  int w = std::uniform_int_distribution<int>(0, ctx.locks.workers() - 1)(ctx.rng);
  LeaseId lease(0);
  // Prefer the current holder (it wrote "<id> <lease>" after acquiring), so the pause hits a
  // worker in the middle of its stages and its lock key is there to watch.
  if (auto h = ctx.prober.Get(HolderKey(ctx.locks.job())); h.ok() && h->has_value()) {
    const std::string& v = (*h)->value();
    int id = std::atoi(v.c_str());
    if (id >= 1 && id <= ctx.locks.workers()) {
      w = id - 1;
      if (std::size_t sp = v.find(' '); sp != std::string::npos) {
        lease = LeaseId(static_cast<std::int64_t>(std::strtoull(v.c_str() + sp + 1, nullptr, 16)));
      }
    }
  }
  milliseconds hold = Between(ctx.rng, 1500, 3000);  // the lease TTL is 1 s
  const auto t0 = std::chrono::steady_clock::now();
  ctx.locks.Pause(w);
  std::string what;
  milliseconds rest = hold;
  if (lease.value() != 0) rest = WatchPausedLease(ctx, w, lease, t0, t0 + hold, &what);
  Hold(rest);
  ctx.locks.Resume(w);
  const auto paused =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  return fmt::format("SIGSTOP worker {} for {} ms (TTL 1 s){}, SIGCONT", w + 1, paused.count(),
                     what);
}

// Removes a voter — the leader one time in three — while it runs (it leaves by itself) or after
// a SIGKILL (a dead member whose disk is gone), wipes its data directory, adds a fresh member as
// a learner in its slot, starts it with --initial-cluster-state existing and promotes it once it
// caught up.
Result<std::string> MemberReplace(FaultContext& ctx, int leader) {
  ChaosCluster& cc = ctx.cluster;
  test::TestCluster& tc = cc.nodes();
  const bool the_leader = std::uniform_int_distribution<int>(0, 2)(ctx.rng) == 0;
  const bool dead = std::uniform_int_distribution<int>(0, 1)(ctx.rng) == 1;
  const int slot = the_leader ? leader : RandomOther(ctx.rng, tc.size(), leader);
  const std::string old = tc.node(slot).name;
  if (dead) tc.Kill(slot);
  Status removed = cc.RemoveMember(slot, std::chrono::seconds(20));
  if (!removed.ok()) return removed.Annotate(fmt::format("removing {}", old));
  const std::optional<int> exit_status = tc.ExitStatus(slot);
  auto t0 = std::chrono::steady_clock::now();
  Result<std::string> name = cc.AddLearner(slot, std::chrono::seconds(20));
  if (!name.ok()) return name.status().Annotate(fmt::format("adding a member in {}'s place", old));
  Status promoted = cc.PromoteWhenCaughtUp(slot, std::chrono::seconds(60));
  if (!promoted.ok()) return promoted.Annotate(fmt::format("promoting {}", *name));
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ctx.replace_ms.push_back(ms);
  return fmt::format(
      "{} {} ({}) removed (exit {}), data wiped; {} added as learner, promoted "
      "{:.0f} ms after MemberAdd",
      dead ? "SIGKILLed" : "running", old, the_leader ? "leader" : "follower",
      exit_status.value_or(-1), *name, ms);
}

// One member's tick clock (Raft ticks, leader lease, the leader's cluster clock) runs at a rate
// within [1 - ρ, 1 + ρ] — the drift the timing rules are designed for — for 1–3 s, then at rate 1
// again. The leader half of the time (its lease and the cluster clock run on it); half the time
// exactly at an extreme, where a rule without its ρ margin would break first.
Result<std::string> ClockSkew(FaultContext& ctx, int leader) {
  const int n = ctx.cluster.size();
  const bool the_leader = std::uniform_int_distribution<int>(0, 1)(ctx.rng) == 0;
  const int node = the_leader ? leader : RandomOther(ctx.rng, n, leader);
  const double sign = std::uniform_int_distribution<int>(0, 1)(ctx.rng) == 0 ? -1.0 : 1.0;
  const bool extreme = std::uniform_int_distribution<int>(0, 1)(ctx.rng) == 0;
  const double magnitude =
      extreme ? kMaxClockDrift
              : std::uniform_real_distribution<double>(0.0, kMaxClockDrift)(ctx.rng);
  const double rate = 1.0 + sign * magnitude;
  milliseconds hold = Between(ctx.rng, 1000, 3000);
  EPOCH_RETURN_IF_ERROR(ctx.cluster.Clock(node, fmt::format("rate={:.4f}", rate)));
  Hold(hold);
  EPOCH_RETURN_IF_ERROR(ctx.cluster.Clock(node, "clear=1"));
  return fmt::format("n{} ({}) tick clock at rate {:.4f} for {} ms, cleared", node + 1,
                     the_leader ? "leader" : "follower", rate, hold.count());
}

// Sets the cluster's election timeout to `ms` and waits until every voter reports it to the
// leader (each member adopts it as it applies it). Returns the time that took.
Result<double> RollOutElectionTimeout(client::Client& client, std::int64_t ms) {
  v1::SetTimingRequest request;
  request.set_election_timeout_ms(ms);
  const auto t0 = std::chrono::steady_clock::now();
  Result<v1::TimingResponse> set = client::SetClusterTiming(client, request);
  if (!set.ok()) return set.status().Annotate(fmt::format("setting a {} ms election timeout", ms));
  for (int attempt = 0; attempt < 200; ++attempt) {
    Result<v1::TimingResponse> now = client::ClusterTiming(client);
    const bool done =
        now.ok() && !now->voters().empty() &&
        std::all_of(now->voters().begin(), now->voters().end(),
                    [ms](const v1::MemberTiming& v) { return v.election_timeout_ms() == ms; });
    if (done) {
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
          .count();
    }
    Hold(milliseconds(50));
  }
  return Status::Timeout(
      fmt::format("the voters did not all report a {} ms election timeout within 10 s", ms));
}

// A cluster timing change under load: a new election timeout rolls out member by member (the
// leader's lease follows the smallest its quorum reports), holds, then the old one rolls back.
Result<std::string> TimingChange(FaultContext& ctx) {
  Result<v1::TimingResponse> before = client::ClusterTiming(ctx.prober);
  if (!before.ok()) return before.status().Annotate("reading the cluster timing");
  const std::int64_t old_ms = before->cluster().election_timeout_ms();
  static constexpr std::int64_t kChoices[] = {200, 300, 450};
  std::int64_t new_ms = kChoices[std::uniform_int_distribution<int>(0, 2)(ctx.rng)];
  if (new_ms == old_ms) new_ms = kChoices[0] == old_ms ? kChoices[1] : kChoices[0];
  Result<double> out = RollOutElectionTimeout(ctx.prober, new_ms);
  if (!out.ok()) return out.status();
  milliseconds hold = Between(ctx.rng, 500, 2000);
  Hold(hold);
  Result<double> back = RollOutElectionTimeout(ctx.prober, old_ms);
  if (!back.ok()) return back.status();
  return fmt::format(
      "election timeout {} -> {} ms (every voter in {:.0f} ms), held {} ms, back "
      "to {} ms (in {:.0f} ms)",
      old_ms, new_ms, *out, hold.count(), old_ms, *back);
}

}  // namespace

std::string_view FaultName(FaultKind kind) {
  static constexpr std::array<std::string_view, kFaultKinds> kNames = {
      "kill-leader",    "kill-follower",    "pause-leader",   "pause-follower", "pause-worker",
      "partition-node", "partition-oneway", "partition-ring", "isolate-leader", "link-delay",
      "link-drop",      "disk-slow",        "disk-stall",     "move-leader",    "member-replace",
      "timing-change",  "clock-skew"};
  return kNames.at(static_cast<std::size_t>(kind));
}

std::optional<FaultKind> FaultByName(std::string_view name) {
  for (int k = 0; k < kFaultKinds; ++k) {
    if (FaultName(static_cast<FaultKind>(k)) == name) return static_cast<FaultKind>(k);
  }
  return std::nullopt;
}

std::vector<FaultKind> FaultSchedule(std::uint64_t seed, int count,
                                     const std::vector<FaultKind>& only, bool membership) {
  std::mt19937_64 rng(seed ^ 0xfa017);
  std::vector<FaultKind> cycle = only;
  if (cycle.empty()) {
    for (int k = 0; k < kFaultKinds; ++k) cycle.push_back(static_cast<FaultKind>(k));
    cycle.push_back(FaultKind::kKillLeader);
    cycle.push_back(FaultKind::kKillLeader);
    cycle.push_back(FaultKind::kPauseLeader);
    cycle.push_back(FaultKind::kMemberReplace);
    if (!membership) std::erase(cycle, FaultKind::kMemberReplace);
  }
  std::vector<FaultKind> out;
  while (static_cast<int>(out.size()) < count) {
    std::shuffle(cycle.begin(), cycle.end(), rng);
    out.insert(out.end(), cycle.begin(), cycle.end());
  }
  out.resize(static_cast<std::size_t>(count));
  return out;
}

Result<std::string> InjectAndHeal(FaultKind kind, FaultContext& ctx) {
  test::TestCluster& tc = ctx.cluster.nodes();
  auto leader = tc.WaitForLeader(std::chrono::seconds(10));
  if (!leader.ok()) return leader.status().Annotate("before the fault");
  int n = tc.size();
  switch (kind) {
    case FaultKind::kKillLeader: return KillLeader(ctx, *leader);
    case FaultKind::kKillFollower: {
      int f = RandomOther(ctx.rng, n, *leader);
      milliseconds hold = Between(ctx.rng, 200, 1500);
      tc.Kill(f);
      Hold(hold);
      EPOCH_RETURN_IF_ERROR(tc.StartNode(f));
      return fmt::format("SIGKILL n{} (follower), restarted after {} ms", f + 1, hold.count());
    }
    case FaultKind::kPauseLeader: return Pause(ctx, *leader, true);
    case FaultKind::kPauseFollower: return Pause(ctx, RandomOther(ctx.rng, n, *leader), false);
    case FaultKind::kPauseWorker: return PauseWorker(ctx);
    case FaultKind::kDiskSlow: return Disk(ctx, *leader, false);
    case FaultKind::kDiskStall: return Disk(ctx, *leader, true);
    case FaultKind::kMoveLeader: {
      int to = RandomOther(ctx.rng, n, *leader);
      Status s = ctx.cluster.MoveLeader(*leader, to);
      return fmt::format("MoveLeader n{} -> n{}: {}", *leader + 1, to + 1,
                         s.ok() ? "ok" : s.ToString());
    }
    case FaultKind::kMemberReplace: return MemberReplace(ctx, *leader);
    case FaultKind::kTimingChange: return TimingChange(ctx);
    case FaultKind::kClockSkew: return ClockSkew(ctx, *leader);
    default: return Partition(kind, ctx, *leader);
  }
}

}  // namespace epoch::chaos
