#include "epoch/chaos/campaign.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "epoch/chaos/chaos_cluster.h"
#include "epoch/chaos/faults.h"
#include "epoch/chaos/lock_workload.h"
#include "epoch/chaos/register_workload.h"
#include "epoch/chaos/watch_workload.h"
#include "epoch/client/client.h"
#include "epoch/test_support/eventually.h"

namespace epoch::chaos {
namespace {

using std::chrono::milliseconds;
using test_support::Eventually;
using test_support::kProcessPoll;

constexpr std::array<const char*, 12> kCheckers = {
    "linearizability", "revision",     "serializable", "watch",    "fencing", "lock-token",
    "lock-overlap",    "lease-expiry", "convergence",  "recovery", "crash",   "setup"};

struct Totals {
  int rounds = 0;
  int iterations = 0;
  std::array<int, kFaultKinds> injected{};
  std::uint64_t lin_ops = 0, unknown = 0, serializable = 0, watch_events = 0, reconnects = 0;
  std::uint64_t commits = 0, stale = 0, acquisitions = 0, lease_reads = 0, read_index_reads = 0;
  int small_snapshot_rounds = 0;
  std::uint64_t recorded = 0, held = 0, token_reads = 0, lease_keys_read = 0;
  std::uint64_t expiry_handovers = 0;
  std::optional<double> min_expiry_handover_ms;
  std::uint64_t snapshots_sent = 0, snapshots_installed = 0, compactions = 0;
  std::map<std::string, int> violations;
  std::vector<double> failover_ms;
  std::vector<double> replace_ms;
  std::vector<std::string> failures;
};

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return fmt::format("{} {} {}", a, b, c);
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
}

// The end-of-round marker every watcher must see. It is part of the check, not a measurement:
// attempts of 2 s, each with a fresh value, for up to 20 s (a failed attempt may still have been
// applied; the watch check compares against whatever the history holds).
Result<etcdserverpb::PutResponse> WriteMarker(client::Client& c) {
  Result<etcdserverpb::PutResponse> r = Status::Unavailable("no attempt");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int attempt = 0; attempt < 10 && std::chrono::steady_clock::now() < deadline; ++attempt) {
    client::CallOptions call;
    call.timeout = milliseconds(2000);
    r = c.Put("/reg/~marker", fmt::format("end-{}", attempt), LeaseId(0), call);
    if (r.ok()) return r;
  }
  return r;
}

bool EveryLinkProxied(ProxyNet& net) {
  for (int a = 0; a < net.nodes(); ++a) {
    for (int b = 0; b < net.nodes(); ++b) {
      if (a != b && net.accepted(a, b) == 0) return false;
    }
  }
  return true;
}

std::unique_ptr<client::Client> MakeProber(const std::vector<std::string>& endpoints,
                                           std::uint64_t seed) {
  client::ClientOptions o;
  o.endpoints = endpoints;
  o.call_timeout = milliseconds(1000);
  o.dial_timeout = milliseconds(100);
  o.retry = {milliseconds(5), milliseconds(50), 0};
  o.seed = seed;
  // Chaos clusters with client TLS serve self-signed --auto-tls certificates (https:// endpoints).
  o.tls.insecure_skip_verify = true;
  auto c = client::Client::Create(o);
  return c.ok() ? std::move(*c) : nullptr;
}

// Rounds r with r % 3 != 0 (1, 2, 4, 5, ...) run with a --snapshot-count drawn from [50, 200] and a
// catch-up tail of a quarter of it (--snapshot-catchup-entries; epochd's default tail of 5,000
// entries would keep any compaction from happening in a round), unless the campaign sets a count
// or the round replaces a member (most rounds of 10 faults do; about one round in four remains).
// At the register workload's rate every member then compacts its log every few hundred
// milliseconds, so a member that was killed, paused or cut off catches up by snapshot (build,
// send, install) under every fault kind. A joining member is left out: the
// snapshot it gets starts where the leader's log starts, the leader compacts again every
// count/2 entries or so, and under load the learner installs snapshot after snapshot and is never
// promoted. Drawn from the round's seed alone, so --only-round re-runs it. 0 = epochd's default.
int RoundSnapshotCount(const CampaignOptions& o, int index, const std::vector<FaultKind>& kinds) {
  if (o.snapshot_count > 0) return o.snapshot_count;
  if (index % 3 == 0 || std::ranges::count(kinds, FaultKind::kMemberReplace) > 0) return 0;
  std::mt19937_64 rng((o.seed + static_cast<std::uint64_t>(index)) ^ 0x5a4a9507);
  return std::uniform_int_distribution<int>(50, 200)(rng);
}

class Round {
 public:
  Round(const CampaignOptions& o, int index, std::vector<FaultKind> kinds, Totals& totals)
      : o_(o),
        index_(index),
        seed_(o.seed + static_cast<std::uint64_t>(index)),
        kinds_(std::move(kinds)),
        t_(totals),
        rng_(seed_),
        snapshot_count_(RoundSnapshotCount(o, index, kinds_)) {}

  void Run();

 private:
  void Violation(const std::string& checker, const std::string& what) {
    violations_.emplace_back(checker, what);
    ++t_.violations[checker];
    Log(fmt::format("VIOLATION [{}] {}", checker, what));
  }
  void Log(const std::string& line) {
    fmt::print("[round {} seed {}] {}\n", index_, seed_, line);
    std::fflush(stdout);
    log_ += line + "\n";
  }
  bool Iterate(ChaosCluster& cc, LockWorkload& locks, RegisterWorkload& reg,
               client::Client& prober);
  void Finish(ChaosCluster& cc, LockWorkload& locks, RegisterWorkload& reg, WatchWorkload& watch,
              client::Client& prober, std::int64_t start_rev);
  void KeepEvidence(ChaosCluster& cc, RegisterWorkload& reg, WatchWorkload& watch);

  const CampaignOptions& o_;
  const int index_;
  const std::uint64_t seed_;
  const std::vector<FaultKind> kinds_;
  Totals& t_;
  std::mt19937_64 rng_;
  std::vector<std::pair<std::string, std::string>> violations_;
  std::string log_;
  std::string watch_history_;
  std::size_t next_ = 0;      // the next fault of kinds_
  const int snapshot_count_;  // epochd --snapshot-count of this round; 0 = its default
};

void Round::Run() {
  ++t_.rounds;
  std::string plan;
  for (FaultKind k : kinds_) plan += fmt::format("{}{}", plan.empty() ? "" : ", ", FaultName(k));
  Log(fmt::format("plan: snapshot-count {}; faults: {}",
                  snapshot_count_ == 0     ? std::string("epochd's default")
                  : o_.snapshot_count == 0 ? fmt::format("{} (catch-up entries {})",
                                                         snapshot_count_, snapshot_count_ / 4)
                                           : std::to_string(snapshot_count_),
                  plan));
  if (snapshot_count_ > 0 && o_.snapshot_count == 0) ++t_.small_snapshot_rounds;
  ChaosClusterOptions copts{o_.epochd_path, o_.nodes,      o_.raft_flags,
                            seed_,          o_.client_tls, o_.peer_tls};
  copts.snapshot_count = snapshot_count_;
  if (o_.snapshot_count == 0 && snapshot_count_ > 0) {
    copts.snapshot_catchup_entries = snapshot_count_ / 4;
  }
  auto cc = ChaosCluster::Start(std::move(copts));
  if (!cc.ok()) return Violation("setup", cc.status().ToString());
  if (!Eventually([&] { return EveryLinkProxied((*cc)->net()); }, milliseconds(10'000),
                  kProcessPoll)) {
    (*cc)->nodes().KeepFiles();
    return Violation("setup", "some peer link never went through its proxy");
  }
  std::vector<std::string> endpoints = (*cc)->ClientEndpoints();
  auto prober = MakeProber(endpoints, seed_);
  Result<etcdserverpb::PutResponse> start = Status::Unavailable("no client");
  if (prober) start = prober->Put("/chaos/start", "1");
  if (!start.ok()) {
    (*cc)->nodes().KeepFiles();
    return Violation("setup", "first write failed: " + start.status().ToString());
  }
  std::int64_t start_rev = start->header().revision() + 1;
  std::string joined;
  for (const auto& e : endpoints) joined += (joined.empty() ? "" : ",") + e;
  LockWorkload locks({o_.self_exe, joined, (*cc)->nodes().dir(), 3, "job-1", 1, kMaxClockDrift});
  if (Status s = locks.Start(); !s.ok()) return Violation("setup", s.ToString());
  RegisterWorkload reg({endpoints, 4, 32, "/reg/", milliseconds(1000), milliseconds(4),
                        milliseconds(50), milliseconds(2000), seed_});
  WatchWorkload watch({endpoints, 2, "/reg/", start_rev});
  reg.Start();
  watch.Start();
  if (!Eventually([&] { return reg.completed() >= 20; }, milliseconds(15'000), kProcessPoll)) {
    Violation("recovery", "the register workload made no progress on a fresh cluster");
  }
  for (std::size_t k = 0; k < kinds_.size() && violations_.empty(); ++k) {
    if (!Iterate(**cc, locks, reg, *prober)) break;
  }
  Finish(**cc, locks, reg, watch, *prober, start_rev);
  if (!violations_.empty()) KeepEvidence(**cc, reg, watch);
}

bool Round::Iterate(ChaosCluster& cc, LockWorkload& locks, RegisterWorkload& reg,
                    client::Client& prober) {
  FaultKind kind = kinds_[next_++];
  std::vector<LeaseObservation> lease_checks;
  FaultContext ctx{cc, locks, prober, rng_, t_.failover_ms, t_.replace_ms, lease_checks};
  auto t0 = std::chrono::steady_clock::now();
  Result<std::string> done = InjectAndHeal(kind, ctx);
  t_.lease_keys_read += lease_checks.size();
  for (const LeaseObservation& o : lease_checks) {
    if (auto v = CheckLeaseExpiry(o)) Violation(v->checker, v->what);
  }
  if (!done.ok()) {
    Violation("recovery", fmt::format("{}: {}", FaultName(kind), done.status().ToString()));
    return false;
  }
  ++t_.iterations;
  ++t_.injected[static_cast<std::size_t>(kind)];
  test::TestCluster& tc = cc.nodes();
  auto healthy = tc.WaitHealthy(milliseconds(20'000));
  std::uint64_t before = reg.completed_writes();
  bool progress = healthy.ok() && Eventually([&] { return reg.completed_writes() >= before + 5; },
                                             milliseconds(15'000), kProcessPoll);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Log(fmt::format("iteration {}: {} — {} ({:.0f} ms to healthy and progressing)", next_ - 1,
                  FaultName(kind), *done, ms));
  if (Status alive = tc.CheckAlive(); !alive.ok()) {
    Violation("crash", alive.ToString());
    return false;
  }
  if (!healthy.ok()) {
    Violation("recovery",
              fmt::format("after {}: {}", FaultName(kind), healthy.status().ToString()));
    return false;
  }
  if (!progress) {
    Violation("recovery",
              fmt::format("after {}: no register write succeeded for 15 s", FaultName(kind)));
    return false;
  }
  return true;
}

void Round::Finish(ChaosCluster& cc, LockWorkload& locks, RegisterWorkload& reg,
                   WatchWorkload& watch, client::Client& prober, std::int64_t start_rev) {
  locks.Stop();
  reg.Stop();
  // Every watcher must see the marker, and then exactly the history up to it.
  auto marker = WriteMarker(prober);
  if (!marker.ok()) {
    Violation("recovery", "marker write failed: " + marker.status().ToString());
  } else {
    std::int64_t m = marker->header().revision();
    if (!watch.WaitForRevision(m, milliseconds(15'000))) {
      Violation("watch", fmt::format("not every watcher reached revision {} within 15 s", m));
    }
    auto history = ReadHistory(cc.ClientEndpoints(), "/reg/", start_rev, m, milliseconds(15'000));
    watch.Stop();
    if (!history.ok()) {
      Violation("watch", "reading the authoritative history: " + history.status().ToString());
    } else {
      for (const WatchEvent& e : *history) {
        watch_history_ += fmt::format("rev={} {} {}={}\n", e.revision,
                                      e.is_delete ? "DELETE" : "PUT", e.key, e.value);
      }
      WatchReport wr = watch.Check(*history);
      t_.watch_events += wr.events;
      t_.reconnects += wr.reconnects;
      if (!wr.violation.empty()) Violation("watch", wr.violation);
    }
  }
  watch.Stop();
  RegisterReport rr = reg.Check(o_.check_budget);
  t_.lin_ops += rr.lin.operations;
  t_.unknown += rr.unknown;
  t_.serializable += rr.serializable;
  if (!rr.lin.Ok()) {
    Violation("linearizability",
              fmt::format("verdict {} in partition {}: {}", lincheck::VerdictName(rr.lin.verdict),
                          rr.lin.failing_partition, rr.lin.description));
  }
  if (!rr.rev.Ok()) Violation("revision", rr.rev.Describe());
  if (!rr.serializable_violation.empty()) Violation("serializable", rr.serializable_violation);
  FencingReport fr = locks.Check();
  t_.commits += fr.commits;
  t_.stale += fr.stale_rejections;
  t_.acquisitions += fr.acquisitions;
  t_.recorded += fr.recorded;
  t_.held += fr.held;
  t_.token_reads += fr.token_reads;
  t_.expiry_handovers += fr.expiry_handovers;
  if (fr.min_expiry_handover_ms) {
    t_.min_expiry_handover_ms = std::min(
        t_.min_expiry_handover_ms.value_or(*fr.min_expiry_handover_ms), *fr.min_expiry_handover_ms);
  }
  for (const NamedViolation& v : fr.violations) Violation(v.checker, v.what);
  std::string detail;
  if (Status s = cc.CheckConverged(milliseconds(15'000), &detail); !s.ok()) {
    Violation("convergence", s.ToString());
  }
  if (Status alive = cc.nodes().CheckAlive(); !alive.ok()) Violation("crash", alive.ToString());
  t_.lease_reads += cc.SumMetric("epoch_reads_lease_total");
  t_.read_index_reads += cc.SumMetric("epoch_reads_read_index_total");
  const std::uint64_t sent = cc.SumMetric("epoch_snapshots_sent_total");
  const std::uint64_t installed = cc.SumMetric("epoch_snapshots_installed_total");
  const std::uint64_t compactions = cc.SumMetric("epoch_log_compactions_total");
  t_.snapshots_sent += sent;
  t_.snapshots_installed += installed;
  t_.compactions += compactions;
  Log(fmt::format(
      "checked: {} ops ({} unknown), {} serializable reads, {} writes with revisions "
      "({} unknown-outcome writes observed), {} fenced commits ({} stale rejections), "
      "{} lock acquisitions recorded ({} held, {} tokens read back, {} handovers after a lease "
      "ran out, closest {}), converged: {}; snapshot-count {}: {} log compactions, {} snapshots "
      "sent, {} installed (counters of the members running at the end)",
      rr.lin.operations, rr.unknown, rr.serializable, rr.rev.writes, rr.rev.observed, fr.commits,
      fr.stale_rejections, fr.recorded, fr.held, fr.token_reads, fr.expiry_handovers,
      fr.min_expiry_handover_ms ? fmt::format("{:.1f} ms", *fr.min_expiry_handover_ms)
                                : std::string("-"),
      detail.empty() ? "no" : detail,
      snapshot_count_ > 0 ? std::to_string(snapshot_count_) : "default", compactions, sent,
      installed));
}

void Round::KeepEvidence(ChaosCluster& cc, RegisterWorkload& reg, WatchWorkload& watch) {
  test::TestCluster& tc = cc.nodes();
  tc.KeepFiles();
  std::ofstream(tc.dir() + "/history.txt") << reg.Dump();
  std::ofstream(tc.dir() + "/watch.txt") << watch.Dump() << "authoritative history:\n"
                                         << watch_history_;
  std::string rerun =
      fmt::format("{} --epochd {} --nodes {} --seed {} --faults-per-round {} --only-round {}",
                  o_.self_exe, o_.epochd_path, o_.nodes, o_.seed, o_.faults_per_round, index_);
  if (!o_.only_faults.empty())
    rerun += " --faults " + fmt::format("{}", fmt::join(o_.only_faults, ","));
  if (!o_.raft_flags.empty()) {
    rerun += fmt::format(" --raft-flags '{}'", fmt::join(o_.raft_flags, " "));
  }
  if (o_.snapshot_count > 0) rerun += fmt::format(" --snapshot-count {}", o_.snapshot_count);
  if (o_.client_tls) rerun += " --client-tls";
  if (o_.peer_tls) rerun += " --peer-tls";
  if (o_.rounds > 1) rerun += fmt::format(" --rounds {}", o_.rounds);
  std::ofstream(tc.dir() + "/round.txt") << log_ << "re-run: " << rerun << "\n";
  std::string line = fmt::format("round {} (seed {}): evidence in {} ; re-run: {}", index_, seed_,
                                 tc.dir(), rerun);
  t_.failures.push_back(line);
  Log(line);
}

void PrintReport(const CampaignOptions& o, const Totals& t, const std::string& load_start) {
  fmt::print("\n=== chaos report ===\n");
  fmt::print(
      "seed {}  nodes {}  rounds {}  fault iterations {}  load average at start {} / end {}\n",
      o.seed, o.nodes, t.rounds, t.iterations, load_start, LoadAverage());
  std::string faults;
  for (int k = 0; k < kFaultKinds; ++k) {
    faults += fmt::format(" {}={}", FaultName(static_cast<FaultKind>(k)),
                          t.injected[static_cast<std::size_t>(k)]);
  }
  fmt::print("faults injected:{}\n", faults);
  fmt::print(
      "operations checked: {} linearizable-history ops ({} with unknown outcome), {} "
      "serializable reads, {} watch events ({} stream re-opens), {} fenced commits ({} stale "
      "rejections, {} lock acquisitions)\n",
      t.lin_ops, t.unknown, t.serializable, t.watch_events, t.reconnects, t.commits, t.stale,
      t.acquisitions);
  fmt::print(
      "lock and lease checks: {} acquisitions recorded ({} held on the holder's own clock, {} "
      "tokens read back), {} keys of paused holders read after lease deadline + bound; {} "
      "handovers after a lease ran out, the closest {} after the holder's deadline\n",
      t.recorded, t.held, t.token_reads, t.lease_keys_read, t.expiry_handovers,
      t.min_expiry_handover_ms ? fmt::format("{:.1f} ms", *t.min_expiry_handover_ms)
                               : std::string("-"));
  fmt::print("linearizable reads served (node counters at round ends): lease {}, ReadIndex {}\n",
             t.lease_reads, t.read_index_reads);
  fmt::print(
      "snapshots (node counters at round ends): {} rounds with a small --snapshot-count, {} log "
      "compactions, {} snapshots sent, {} installed\n",
      o.snapshot_count > 0 ? fmt::format("all (--snapshot-count {})", o.snapshot_count)
                           : std::to_string(t.small_snapshot_rounds),
      t.compactions, t.snapshots_sent, t.snapshots_installed);
  std::string v;
  for (const char* c : kCheckers) {
    auto it = t.violations.find(c);
    v += fmt::format(" {}={}", c, it == t.violations.end() ? 0 : it->second);
  }
  fmt::print("violations:{}\n", v);
  fmt::print(
      "failover (leader SIGKILL -> first successful client write), {} kills: p50 {:.1f} ms, "
      "p99 {:.1f} ms, max {:.1f} ms\n",
      t.failover_ms.size(), Percentile(t.failover_ms, 0.5), Percentile(t.failover_ms, 0.99),
      t.failover_ms.empty() ? 0.0 : *std::max_element(t.failover_ms.begin(), t.failover_ms.end()));
  fmt::print(
      "member replacement (MemberAdd -> promoted voter), {} replacements: p50 {:.1f} ms, max "
      "{:.1f} ms\n",
      t.replace_ms.size(), Percentile(t.replace_ms, 0.5),
      t.replace_ms.empty() ? 0.0 : *std::max_element(t.replace_ms.begin(), t.replace_ms.end()));
  for (const std::string& f : t.failures) fmt::print("FAILED {}\n", f);
}

}  // namespace

int RunCampaign(const CampaignOptions& o) {
  std::string load_start = LoadAverage();
  std::vector<FaultKind> only;
  for (const std::string& name : o.only_faults) {
    std::optional<FaultKind> kind = FaultByName(name);
    if (!kind) {
      fmt::print(stderr, "chaos_runner: unknown fault '{}'\n", name);
      return 2;
    }
    only.push_back(*kind);
  }
  std::vector<FaultKind> schedule =
      FaultSchedule(o.seed, o.rounds * o.faults_per_round, only, !o.peer_tls);
  Totals t;
  for (int r = 0; r < o.rounds; ++r) {
    if (o.only_round >= 0 && r != o.only_round) continue;
    auto first = schedule.begin() + static_cast<long>(r) * o.faults_per_round;
    Round round(o, r, std::vector<FaultKind>(first, first + o.faults_per_round), t);
    round.Run();
  }
  PrintReport(o, t, load_start);
  bool every_kind = true;
  for (int k = 0; k < kFaultKinds; ++k) {
    const bool possible = !(o.peer_tls && static_cast<FaultKind>(k) == FaultKind::kMemberReplace);
    if (possible && t.injected[static_cast<std::size_t>(k)] == 0) every_kind = false;
  }
  if (o.require_every_kind && o.only_round < 0 && only.empty() && !every_kind) {
    fmt::print("FAILED: not every fault kind was injected (run more iterations)\n");
    return 1;
  }
  return t.violations.empty() ? 0 : 1;
}

}  // namespace epoch::chaos
