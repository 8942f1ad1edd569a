// epoch_abuse_bench: does an abusive client hurt the others?
//
// Starts a 3-member epochd cluster on loopback, loads `--keys` keys, then measures a well-behaved
// client (one thread putting, one reading linearizably, both at the leader) for `--seconds`
// without an abuser and then with each abuser of abusers.h in turn. Prints put and get p99, the
// leader changes seen (etcd_server_leader_changes_seen_total), and each member's RSS before and
// after. Bounded: every phase ends after its seconds, every call has a deadline.
//
// --short (the ctest variant, label `abuse`): fewer keys and streams, short phases; exits non-zero
// if the leader changed, a member died, or a member's RSS reached twice its value before the
// abuse. It never judges a latency.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "abusers.h"
#include "epoch/test_support/test_cluster.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool short_run = false;
  int seconds = 10;
  int keys = 100'000;
  int keepalive_streams = 10'000;
  std::string epochd = EPOCHD_PATH;
  // Only the abusers whose name contains this (all when empty).
  std::string only;
};

struct Latencies {
  std::vector<double> put_ms, get_ms;
  std::vector<double> put_at_s, get_at_s;  // each call's start, seconds into the phase
  std::uint64_t put_errors = 0, get_errors = 0;
};

// The calls of `ms` that started at or after `from_s` seconds into the phase.
std::vector<double> From(const std::vector<double>& ms, const std::vector<double>& at_s,
                         double from_s) {
  std::vector<double> out;
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (at_s[i] >= from_s) out.push_back(ms[i]);
  }
  return out;
}

double P99(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(v.size() * 0.99))];
}

// The well-behaved client: puts and linearizable gets at `address` for `duration`, one call at a
// time on each of two threads; at most 1,000,000 calls each.
Latencies Measure(const std::string& address, std::chrono::seconds duration) {
  Latencies out;
  const auto begin = Clock::now();
  const auto end = begin + duration;
  auto run = [&](bool put, std::vector<double>* ms, std::vector<double>* at_s,
                 std::uint64_t* errors) {
    auto kv = etcdserverpb::KV::NewStub(OwnConnection(address));
    for (int i = 0; i < 1'000'000 && Clock::now() < end; ++i) {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      const auto start = Clock::now();
      grpc::Status status;
      if (put) {
        etcdserverpb::PutRequest request;
        request.set_key(fmt::format("good/{}", i % 100));
        request.set_value(std::string(256, 'g'));
        etcdserverpb::PutResponse response;
        status = kv->Put(&ctx, request, &response);
      } else {
        etcdserverpb::RangeRequest request;
        request.set_key(fmt::format("good/{}", i % 100));
        etcdserverpb::RangeResponse response;
        status = kv->Range(&ctx, request, &response);
      }
      if (!status.ok()) {
        ++*errors;
        continue;
      }
      ms->push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      at_s->push_back(std::chrono::duration<double>(start - begin).count());
    }
  };
  std::thread putter(run, true, &out.put_ms, &out.put_at_s, &out.put_errors);
  run(false, &out.get_ms, &out.get_at_s, &out.get_errors);
  putter.join();
  return out;
}

// `keys` keys of 32 bytes, in txns of 128 puts (etcd's --max-txn-ops), from four threads.
bool Load(const std::string& address, int keys) {
  std::atomic<bool> ok{true};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto kv = etcdserverpb::KV::NewStub(OwnConnection(address));
      for (int first = t * 128; first < keys && ok; first += 4 * 128) {
        etcdserverpb::TxnRequest txn;
        for (int k = first; k < std::min(keys, first + 128); ++k) {
          auto* put = txn.add_success()->mutable_request_put();
          put->set_key(fmt::format("load/{:08}", k));
          put->set_value(std::string(32, 'l'));
        }
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        etcdserverpb::TxnResponse response;
        if (!kv->Txn(&ctx, txn, &response).ok()) ok = false;
      }
    });
  }
  for (auto& t : threads) t.join();
  return ok;
}

struct MemberSample {
  double leader_changes = 0;
  double rss_bytes = 0;
};

std::vector<MemberSample> Sample(test::TestCluster& cluster) {
  std::vector<MemberSample> out;
  for (int i = 0; i < cluster.size(); ++i) {
    MemberSample s;
    s.leader_changes = cluster.Metric(i, "etcd_server_leader_changes_seen_total").value_or(-1);
    s.rss_bytes = cluster.Metric(i, "process_resident_memory_bytes").value_or(-1);
    out.push_back(s);
  }
  return out;
}

std::string Mib(double bytes) { return fmt::format("{:.0f}", bytes / (1 << 20)); }

int Run(const Options& o) {
  test::ClusterOptions copts;
  copts.epochd_path = o.epochd;
  copts.nodes = 3;
  copts.extra_flags = {};  // epochd's defaults (etcd's timing: heartbeat 100 ms, election 1 s)
  Result<std::unique_ptr<test::TestCluster>> started = test::TestCluster::Start(copts);
  if (!started.ok()) {
    fmt::print(stderr, "cluster did not start: {}\n", started.status().ToString());
    return 1;
  }
  test::TestCluster& cluster = **started;
  Result<int> leader = cluster.WaitForLeader(std::chrono::seconds(20));
  if (!leader.ok()) {
    fmt::print(stderr, "no leader: {}\n", leader.status().ToString());
    return 1;
  }
  const std::string address = cluster.node(*leader).client_address();
  const auto load_start = Clock::now();
  if (!Load(address, o.keys)) {
    fmt::print(stderr, "loading {} keys failed\n", o.keys);
    return 1;
  }
  fmt::print("loaded {} keys in {:.1f} s; leader {}\n", o.keys,
             std::chrono::duration<double>(Clock::now() - load_start).count(),
             cluster.node(*leader).name);

  // A lease for the keep-alive streams, longer than the whole run.
  std::int64_t lease_id = 0;
  {
    auto lease = etcdserverpb::Lease::NewStub(cluster.Channel(*leader));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(3600);
    etcdserverpb::LeaseGrantResponse granted;
    if (!lease->LeaseGrant(&ctx, grant, &granted).ok()) return 1;
    lease_id = granted.id();
  }

  const std::chrono::seconds phase(o.seconds);
  const std::vector<MemberSample> before = Sample(cluster);
  Latencies baseline = Measure(address, phase);
  const double put_p99 = P99(baseline.put_ms), get_p99 = P99(baseline.get_ms);
  fmt::print("\n{:<26} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7}  {}\n", "phase", "put p99", "get p99",
             "put x", "get x", "ops", "errors", "RSS MiB per member (before -> after)");
  fmt::print("{:<26} {:>7.2f}ms {:>7.2f}ms {:>9} {:>9} {:>8} {:>7}\n", "no abuser", put_p99,
             get_p99, "1.00", "1.00", baseline.put_ms.size() + baseline.get_ms.size(),
             baseline.put_errors + baseline.get_errors);

  std::vector<std::unique_ptr<Abuser>> abusers;
  abusers.push_back(MakeFullRangeTxnAbuser(address));
  abusers.push_back(MakeUnreadSnapshotAbuser(address, std::chrono::seconds(1), o.seconds));
  abusers.push_back(MakeUnreadKeepAliveAbuser(address, lease_id, o.keepalive_streams));
  bool failed = false;
  for (auto& abuser : abusers) {
    if (abuser->name().find(o.only) == std::string::npos) continue;
    const std::vector<MemberSample> start = Sample(cluster);
    const auto phase_start = Clock::now();
    abuser->Start();
    // When the abuser settled (seconds into the phase; the phase's length if it never did).
    std::atomic<double> settled_s{static_cast<double>(o.seconds)};
    std::thread settle_watch([&] {
      while (Clock::now() - phase_start < phase) {
        if (abuser->Settled()) {
          settled_s = std::chrono::duration<double>(Clock::now() - phase_start).count();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    });
    Latencies with = Measure(address, phase);
    settle_watch.join();
    const std::vector<MemberSample> end = Sample(cluster);
    abuser->Stop();
    std::string rss;
    for (std::size_t i = 0; i < end.size(); ++i) {
      rss +=
          fmt::format("{}{} -> {}", i ? ", " : "", Mib(start[i].rss_bytes), Mib(end[i].rss_bytes));
      if (end[i].rss_bytes >= 2 * before[i].rss_bytes) {
        fmt::print(stderr, "member {} RSS grew from {} to {} MiB\n", i, Mib(before[i].rss_bytes),
                   Mib(end[i].rss_bytes));
        failed = true;
      }
    }
    const double p = P99(with.put_ms), g = P99(with.get_ms);
    fmt::print("{:<26} {:>7.2f}ms {:>7.2f}ms {:>9.2f} {:>9.2f} {:>8} {:>7}  {}\n", abuser->name(),
               p, g, p / put_p99, g / get_p99, with.put_ms.size() + with.get_ms.size(),
               with.put_errors + with.get_errors, rss);
    fmt::print("{:<26} {}\n", "", abuser->Summary());
    if (settled_s > 0.05 && settled_s < o.seconds - 1) {
      // The same phase from the moment the abuser held what it opened: its steady state.
      const double hp = P99(From(with.put_ms, with.put_at_s, settled_s));
      const double hg = P99(From(with.get_ms, with.get_at_s, settled_s));
      fmt::print(
          "{:<26} {:>7.2f}ms {:>7.2f}ms {:>9.2f} {:>9.2f}  (held: from {:.1f} s, once "
          "every stream was opened or refused)\n",
          "  held", hp, hg, hp / put_p99, hg / get_p99, settled_s.load());
    }
  }

  const std::vector<MemberSample> after = Sample(cluster);
  double changes = 0;
  for (std::size_t i = 0; i < after.size(); ++i) {
    changes = std::max(changes, after[i].leader_changes - before[i].leader_changes);
  }
  Result<int> leader_after = cluster.WaitForLeader(std::chrono::seconds(10));
  const bool same_leader = leader_after.ok() && *leader_after == *leader;
  const Status alive = cluster.CheckAlive();
  fmt::print("\nleader changes during the abuse: {} (same leader: {}); members alive: {}\n",
             changes, same_leader ? "yes" : "no", alive.ok() ? "yes" : alive.ToString());
  fmt::print(
      "epoch_snapshot_streams_cut_total {} epoch_lease_keepalive_streams_cut_total {} "
      "epoch_txn_read_limit_refused_total precheck {} apply {} (leader)\n",
      cluster.Metric(*leader, "epoch_snapshot_streams_cut_total").value_or(-1),
      cluster.Metric(*leader, "epoch_lease_keepalive_streams_cut_total").value_or(-1),
      cluster.Metric(*leader, R"(epoch_txn_read_limit_refused_total{stage="precheck"})")
          .value_or(-1),
      cluster.Metric(*leader, R"(epoch_txn_read_limit_refused_total{stage="apply"})").value_or(-1));
  if (changes > 0 || !same_leader || !alive.ok()) failed = true;
  if (failed) fmt::print("FAILED: {}\n", o.short_run ? "see above" : "see above (not a test run)");
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace epoch::bench

int main(int argc, char** argv) {
  CLI::App app("Epoch abuse benchmark: a well-behaved client's p99 with and without abusers");
  epoch::bench::Options o;
  app.add_flag("--short", o.short_run, "ctest variant: 20k keys, 1,000 streams, 4 s phases");
  app.add_option("--seconds", o.seconds, "Seconds per phase")->check(CLI::Range(1, 600));
  app.add_option("--keys", o.keys, "Keys loaded before the phases")
      ->check(CLI::Range(1, 10'000'000));
  app.add_option("--keepalive-streams", o.keepalive_streams, "Unread keep-alive streams")
      ->check(CLI::Range(1, 100'000));
  app.add_option("--epochd", o.epochd, "The epochd to run (default: this build's)");
  app.add_option("--only", o.only, "Only the abusers whose name contains this");
  CLI11_PARSE(app, argc, argv);
  if (o.short_run) {
    o.seconds = 4;
    o.keys = 20'000;
    o.keepalive_streams = 1'000;
  }
  return epoch::bench::Run(o);
}
