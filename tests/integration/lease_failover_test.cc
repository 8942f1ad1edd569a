// Leases across a leader failover, with real processes: SIGKILL the leader while a
// keep-alive stream runs through a follower — the kept lease survives and its stream goes on; a
// lease nobody renews keeps its deadline on the replicated cluster clock: its remaining TTL after
// the failover is what it was, minus the time that passed, plus at most the published bound
// (epoch.v1.Lease/ClockStatus max_failover_extension_ms) — never reset to the full TTL.
//
// The extension of one failover is measured from outside: R0 = remaining TTL on the old leader
// at t0, R1 = remaining TTL on the new leader (once its clock runs) at t1, both from
// epoch.v1.Lease/Status in milliseconds; extension = R1 − (R0 − (t1 − t0)). Each t is the middle
// of its RPC, so the measurement error is at most half of each RPC's duration (added as slack).
//
// "[.][soak]" repeats the kill EPOCH_LEASE_KILLS times (default 20) and prints every extension
// and the maximum: integration_tests "lease extension over repeated leader kills".
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "epoch/v1/epoch.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::int64_t MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<milliseconds>(b - a).count();
}

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return ctx;
}

std::int64_t GrantMs(TestCluster& cluster, int node, std::int64_t ttl_ms) {
  auto stub = v1::Lease::NewStub(cluster.Channel(node));
  v1::LeaseGrantRequest request;
  request.set_ttl_ms(ttl_ms);
  v1::LeaseGrantResponse response;
  grpc::ClientContext ctx;
  grpc::Status s = stub->Grant(WithDeadline(&ctx), request, &response);
  INFO("grant on " << cluster.node(node).name << ": " << s.error_message());
  REQUIRE(s.ok());
  REQUIRE(response.id() != 0);
  CHECK(response.ttl_ms() == ttl_ms);
  return response.id();
}

// A remaining-TTL reading and when it was taken (the middle of the RPC) ± half its duration.
struct Reading {
  v1::LeaseStatusResponse status;
  Clock::time_point at;
  std::int64_t error_ms = 0;
};

Reading StatusOf(TestCluster& cluster, int node, std::int64_t id) {
  auto stub = v1::Lease::NewStub(cluster.Channel(node));
  v1::LeaseStatusRequest request;
  request.set_id(id);
  Reading r;
  grpc::ClientContext ctx;
  const Clock::time_point before = Clock::now();
  grpc::Status s = stub->Status(WithDeadline(&ctx), request, &r.status);
  const Clock::time_point after = Clock::now();
  INFO("lease status on " << cluster.node(node).name << ": " << s.error_message());
  REQUIRE(s.ok());
  r.at = before + (after - before) / 2;
  r.error_ms = MsBetween(before, after) / 2 + 1;
  return r;
}

v1::ClockStatusResponse ClockOf(TestCluster& cluster, int node) {
  auto stub = v1::Lease::NewStub(cluster.Channel(node));
  v1::ClockStatusResponse response;
  grpc::ClientContext ctx;
  grpc::Status s = stub->ClockStatus(WithDeadline(&ctx), {}, &response);
  INFO("clock status on " << cluster.node(node).name << ": " << s.error_message());
  REQUIRE(s.ok());
  return response;
}

// Polls (bounded) until `node` leads with its cluster clock running.
void WaitClockRunning(TestCluster& cluster, int node) {
  if (!Eventually([&] { return ClockOf(cluster, node).leader_clock_running(); },
                  std::chrono::seconds(10), milliseconds(2))) {
    FAIL("the new leader's cluster clock did not start within 10 s");
  }
}

// Keeps one lease alive over an etcdserverpb.Lease/LeaseKeepAlive stream, as clientv3 does:
// a keep-alive every `period` whatever happened to the previous one, replies read on their own
// thread. Bounded: at most kMaxSends keep-alives.
class KeepAliveStreamer {
 public:
  static constexpr int kMaxSends = 400;

  KeepAliveStreamer(std::shared_ptr<grpc::Channel> channel, std::int64_t id, milliseconds period)
      : stub_(etcdserverpb::Lease::NewStub(std::move(channel))), id_(id), period_(period) {
    stream_ = stub_->LeaseKeepAlive(&ctx_);
    reader_ = std::thread([this] { ReadLoop(); });
    writer_ = std::thread([this] { WriteLoop(); });
  }
  ~KeepAliveStreamer() { Stop(); }

  void Stop() {
    if (stopped_.exchange(true)) return;
    writer_.join();
    ctx_.TryCancel();
    reader_.join();
    (void)stream_->Finish();
  }

  // (time, TTL) of every reply so far.
  std::vector<std::pair<Clock::time_point, std::int64_t>> replies() {
    std::lock_guard lock(mu_);
    return replies_;
  }

 private:
  void WriteLoop() {
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(id_);
    for (int i = 0; i < kMaxSends && !stopped_.load(); ++i) {
      if (!stream_->Write(request)) return;
      std::this_thread::sleep_for(period_);  // the keep-alive cadence, like clientv3's
    }
  }
  void ReadLoop() {
    etcdserverpb::LeaseKeepAliveResponse response;
    while (stream_->Read(&response)) {
      std::lock_guard lock(mu_);
      replies_.emplace_back(Clock::now(), response.ttl());
    }
  }

  std::unique_ptr<etcdserverpb::Lease::Stub> stub_;
  const std::int64_t id_;
  const milliseconds period_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                           etcdserverpb::LeaseKeepAliveResponse>>
      stream_;
  std::atomic<bool> stopped_{false};
  std::mutex mu_;
  std::vector<std::pair<Clock::time_point, std::int64_t>> replies_;  // guarded by mu_
  std::thread reader_;
  std::thread writer_;
};

struct FailoverSample {
  std::int64_t ttl_ms = 0;
  std::int64_t before_ms = 0;     // R0
  std::int64_t after_ms = 0;      // R1
  std::int64_t elapsed_ms = 0;    // t1 - t0
  std::int64_t extension_ms = 0;  // R1 - (R0 - elapsed)
  std::int64_t error_ms = 0;      // measurement error bound
  std::int64_t bound_ms = 0;      // published max_failover_extension_ms
  std::int64_t stall_ms = -1;     // the new leader's own measurement
  int old_leader = -1;
  int new_leader = -1;
  Clock::time_point killed_at;
  Clock::time_point clock_running_at;
};

// Grants a lease of `ttl_ms` on the leader, lets 1 s of it pass, kills the leader and reads the
// remaining TTL again on the new leader. REQUIREs that the lease survived.
FailoverSample KillLeaderAndMeasure(TestCluster& cluster, std::int64_t ttl_ms) {
  FailoverSample s;
  s.ttl_ms = ttl_ms;
  Result<int> leader = cluster.WaitHealthy(std::chrono::seconds(20));
  REQUIRE(leader.ok());
  s.old_leader = *leader;
  WaitClockRunning(cluster, s.old_leader);
  const std::int64_t id = GrantMs(cluster, s.old_leader, ttl_ms);
  // Use up a second of the TTL so "reset to full" cannot hide inside the bound.
  Reading r0;
  Eventually(
      [&] {
        r0 = StatusOf(cluster, s.old_leader, id);
        return r0.status.remaining_ttl_ms() <= ttl_ms - 1000;
      },
      std::chrono::seconds(10), kProcessPoll);
  REQUIRE(r0.status.found());
  REQUIRE(r0.status.remaining_ttl_ms() <= ttl_ms - 1000);

  cluster.Kill(s.old_leader);
  s.killed_at = Clock::now();
  Result<int> next = cluster.WaitForLeader(std::chrono::seconds(20), s.old_leader);
  INFO("no new leader: " << next.status().ToString());
  REQUIRE(next.ok());
  s.new_leader = *next;
  WaitClockRunning(cluster, s.new_leader);
  s.clock_running_at = Clock::now();
  Reading r1 = StatusOf(cluster, s.new_leader, id);
  REQUIRE(r1.status.found());  // the lease survived the failover

  v1::ClockStatusResponse clock = ClockOf(cluster, s.new_leader);
  s.before_ms = r0.status.remaining_ttl_ms();
  s.after_ms = r1.status.remaining_ttl_ms();
  s.elapsed_ms = MsBetween(r0.at, r1.at);
  s.extension_ms = s.after_ms - (s.before_ms - s.elapsed_ms);
  s.error_ms = r0.error_ms + r1.error_ms;
  s.bound_ms = clock.max_failover_extension_ms();
  s.stall_ms = clock.last_start_stall_ms();
  return s;
}

void Report(const FailoverSample& s) {
  fmt::print(
      "lease failover: ttl={}ms remaining before={}ms after={}ms elapsed={}ms extension={}ms "
      "(±{}ms) published bound={}ms leader-measured stall={}ms\n",
      s.ttl_ms, s.before_ms, s.after_ms, s.elapsed_ms, s.extension_ms, s.error_ms, s.bound_ms,
      s.stall_ms);
}

void CheckSample(const FailoverSample& s) {
  INFO(fmt::format("before={} after={} elapsed={} extension={} error={} bound={}", s.before_ms,
                   s.after_ms, s.elapsed_ms, s.extension_ms, s.error_ms, s.bound_ms));
  CHECK(s.after_ms > 0);
  // Never reset to full: a second was used before the kill and the extension is bounded.
  CHECK(s.after_ms < s.ttl_ms - 1000 + s.bound_ms);
  CHECK(s.after_ms < s.ttl_ms);
  CHECK(s.extension_ms <= s.bound_ms + s.error_ms);
  // The cluster clock never runs ahead of real time by more than the measurement error.
  CHECK(s.extension_ms >= -s.error_ms);
}

TEST_CASE("SIGKILL the leader during a keep-alive stream: the lease survives, TTLs are not reset",
          "[integration][lease][failover]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(20));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  WaitClockRunning(*cluster, *leader);

  // A lease kept alive through a follower (which forwards each keep-alive to the leader).
  auto etcd_lease = etcdserverpb::Lease::NewStub(cluster->Channel(follower));
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(3);
  etcdserverpb::LeaseGrantResponse granted;
  {
    grpc::ClientContext ctx;
    grpc::Status s = etcd_lease->LeaseGrant(WithDeadline(&ctx), grant, &granted);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  KeepAliveStreamer streamer(cluster->Channel(follower), granted.id(), milliseconds(250));

  FailoverSample sample = KillLeaderAndMeasure(*cluster, 8000);
  Report(sample);
  CheckSample(sample);

  // The stream rode out the failover: answered again after the new leader's clock started,
  // never with TTL 0, and the kept lease is alive.
  auto answered_after = [&] {
    int n = 0;
    for (const auto& [at, ttl] : streamer.replies()) n += at > sample.clock_running_at ? 1 : 0;
    return n;
  };
  Eventually([&] { return answered_after() >= 3; }, std::chrono::seconds(10), kProcessPoll);
  streamer.Stop();
  CHECK(answered_after() >= 3);
  for (const auto& [at, ttl] : streamer.replies()) CHECK(ttl == 3);
  etcdserverpb::LeaseTimeToLiveRequest ttl_request;
  ttl_request.set_id(granted.id());
  etcdserverpb::LeaseTimeToLiveResponse ttl_response;
  grpc::ClientContext ctx;
  grpc::Status s = etcd_lease->LeaseTimeToLive(WithDeadline(&ctx), ttl_request, &ttl_response);
  REQUIRE(s.ok());
  CHECK(ttl_response.ttl() > 0);
  CHECK(ttl_response.grantedttl() == 3);
}

TEST_CASE("lease extension over repeated leader kills", "[.][soak][integration][lease]") {
  int kills = 20;
  if (const char* env = std::getenv("EPOCH_LEASE_KILLS")) kills = std::max(1, std::atoi(env));
  auto cluster = StartCluster();
  std::int64_t max_extension = 0;
  std::int64_t bound = 0;
  for (int i = 0; i < kills; ++i) {
    FailoverSample s = KillLeaderAndMeasure(*cluster, 8000);
    fmt::print("kill {}/{}: ", i + 1, kills);
    Report(s);
    CheckSample(s);
    max_extension = std::max(max_extension, s.extension_ms);
    bound = s.bound_ms;
    epoch::Status started = cluster->StartNode(s.old_leader);
    INFO(started.ToString());
    REQUIRE(started.ok());
  }
  fmt::print("lease failover: max extension over {} leader kills = {} ms (published bound {} ms)\n",
             kills, max_extension, bound);
}

}  // namespace
}  // namespace epoch::integration
