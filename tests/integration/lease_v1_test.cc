// epoch.v1.Lease against a real 3-node cluster: millisecond TTLs (raised to the minimum), Status
// with the deadline on the cluster clock, the maximum extension and the attached keys' fencing
// tokens, keep-alives over the v1 stream through a follower, expiry of a millisecond lease, the
// clock status and the lease metrics.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "epoch/v1/epoch.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

grpc::ClientContext* WithDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return ctx;
}

v1::LeaseGrantResponse Grant(v1::Lease::Stub& stub, std::int64_t ttl_ms) {
  v1::LeaseGrantRequest request;
  request.set_ttl_ms(ttl_ms);
  v1::LeaseGrantResponse response;
  grpc::ClientContext ctx;
  grpc::Status s = stub.Grant(WithDeadline(&ctx), request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return response;
}

v1::LeaseStatusResponse StatusOf(v1::Lease::Stub& stub, std::int64_t id, bool keys) {
  v1::LeaseStatusRequest request;
  request.set_id(id);
  request.set_keys(keys);
  v1::LeaseStatusResponse response;
  grpc::ClientContext ctx;
  grpc::Status s = stub.Status(WithDeadline(&ctx), request, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return response;
}

TEST_CASE("epoch.v1 lease: millisecond TTLs, status on the cluster clock, fencing tokens",
          "[integration][lease][v1]") {
  // A 600 ms election floor instead of the fast tests' 150 ms: this test reads the expiry
  // metrics of the leader it started with, and on a loaded 2-core machine a 150 ms stall of all
  // three members (ctest runs other clusters beside it) made that leader step down.
  auto cluster = StartCluster(
      3, {"--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "60"});
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(20));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  auto lease = v1::Lease::NewStub(cluster->Channel(follower));

  v1::ClockStatusResponse clock;
  {
    grpc::ClientContext ctx;
    REQUIRE(lease->ClockStatus(WithDeadline(&ctx), {}, &clock).ok());
  }
  // 1.5 election floors of this cluster (600 ms).
  CHECK(clock.min_ttl_ms() == 900);
  CHECK(clock.max_failover_extension_ms() > clock.clock_tick_interval_ms());
  CHECK_FALSE(clock.leader_clock_running());  // asked a follower

  // Below the minimum: raised.
  CHECK(Grant(*lease, 50).ttl_ms() == 900);

  v1::LeaseGrantResponse g = Grant(*lease, 1500);
  CHECK(g.ttl_ms() == 1500);
  CHECK(g.deadline_cluster_ms() > 0);
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(*leader));
  etcdserverpb::PutRequest put;
  put.set_key("job/1");
  put.set_value("w1");
  put.set_lease(g.id());
  etcdserverpb::PutResponse put_response;
  {
    grpc::ClientContext ctx;
    REQUIRE(kv->Put(WithDeadline(&ctx), put, &put_response).ok());
  }

  auto on_leader = v1::Lease::NewStub(cluster->Channel(*leader));
  v1::LeaseStatusResponse st = StatusOf(*on_leader, g.id(), true);
  REQUIRE(st.found());
  CHECK(st.granted_ttl_ms() == 1500);
  CHECK(st.deadline_cluster_ms() == g.deadline_cluster_ms());  // not renewed since
  CHECK(st.remaining_ttl_ms() == st.deadline_cluster_ms() - st.now_cluster_ms());
  CHECK(st.remaining_ttl_ms() > 0);
  CHECK(st.remaining_ttl_ms() <= 1500);
  // The bound for this lease: the failover bound plus drift over the TTL, the expiry check and
  // a commit.
  CHECK(st.max_extension_ms() > clock.max_failover_extension_ms());
  REQUIRE(st.keys_size() == 1);
  CHECK(st.keys(0).key() == "job/1");
  CHECK(st.keys(0).fencing_token() == put_response.header().revision());  // its create_revision

  // Keep it alive over the v1 stream through the follower for 3 s (two TTLs). Answers are read
  // on their own thread: a keep-alive caught in a leader change gets no answer by design (the
  // client sends the next one on its schedule), and a blocking read after each write would then
  // wait forever. The stream's deadline bounds the whole exchange.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    auto stream = lease->KeepAlive(&ctx);
    std::atomic<int> answered{0};
    std::atomic<int> wrong{0};
    std::thread reader([&] {
      v1::LeaseKeepAliveResponse response;
      while (stream->Read(&response)) {
        const bool ok = response.id() == g.id() && response.ttl_ms() == 1500 &&
                        response.deadline_cluster_ms() > g.deadline_cluster_ms();
        (ok ? answered : wrong).fetch_add(1);
      }
    });
    v1::LeaseKeepAliveRequest request;
    request.set_id(g.id());
    int written = 0;
    for (const auto until = Clock::now() + std::chrono::seconds(3); Clock::now() < until;) {
      if (!stream->Write(request)) break;
      ++written;
      std::this_thread::sleep_for(milliseconds(300));  // the keep-alive cadence (TTL / 5)
    }
    stream->WritesDone();
    reader.join();
    CHECK(stream->Finish().ok());
    CHECK(written >= 8);
    CHECK(wrong.load() == 0);
    CHECK(answered.load() >= 8);
  }
  CHECK(StatusOf(*on_leader, g.id(), false).found());

  // Unknown lease: Renew answers TTL 0.
  {
    v1::LeaseKeepAliveRequest request;
    request.set_id(777);
    v1::LeaseKeepAliveResponse response;
    grpc::ClientContext ctx;
    REQUIRE(lease->Renew(WithDeadline(&ctx), request, &response).ok());
    CHECK(response.ttl_ms() == 0);
  }

  // Left alone, the lease expires about 1.5 s after its last renewal and its key goes with it.
  REQUIRE(Eventually([&] { return !StatusOf(*on_leader, g.id(), false).found(); },
                     std::chrono::seconds(15), kProcessPoll));
  CHECK(MustRange(*cluster, *leader, "job/1").kvs_size() == 0);

  // The lease metrics on the leader.
  Result<test::HttpResponse> metrics = cluster->Http(*leader, "/metrics");
  REQUIRE(metrics.ok());
  for (const char* name :
       {"epoch_cluster_clock_running 1", "epoch_leases_expired_total",
        "epoch_lease_max_failover_extension_seconds", "epoch_lease_renewal_entries_total",
        "epoch_lease_keepalive_seconds_count", "epoch_cluster_time_seconds"}) {
    INFO(name);
    CHECK(metrics->body.find(name) != std::string::npos);
  }
  // Both leases of this test expired on this leader's watch.
  const std::string expired = "\nepoch_leases_expired_total ";
  const std::size_t at = metrics->body.find(expired);
  REQUIRE(at != std::string::npos);
  CHECK(std::stoll(metrics->body.substr(at + expired.size())) == 2);
}

}  // namespace
}  // namespace epoch::integration
