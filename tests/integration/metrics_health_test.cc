// /health, /readyz and /livez like etcd's, against a real 3-member cluster: a member whose WAL
// stalls (the disk failpoint) turns unhealthy once a write has waited past the durability-stall
// bound, and healthy again when the disk returns; a NOSPACE alarm makes every member unhealthy
// until it is disarmed; a member without a quorum is unhealthy but live.
#include <fmt/format.h>

#include "epoch/test_support/loopback.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The fast-test timing of ClusterOptions, whose durability-stall bound is the default 50 ticks:
// 500 ms.
const std::vector<std::string> kFlags = {
    "--tick-ms",          "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "15",
    "--enable-failpoints"};
constexpr milliseconds kStallBound{500};

test::HttpResponse Get(std::uint16_t port, std::string_view path) {
  Result<test::HttpResponse> r = test::HttpGet(port, path, seconds(5));
  INFO(std::string(path) << ": " << (r.ok() ? "" : r.status().ToString()));
  REQUIRE(r.ok());
  return *r;
}

bool Healthy(const TestCluster& cluster, int i) {
  return Get(cluster.node(i).client_port, "/health").body == "{\"health\":\"true\"}";
}

// The reason in an unhealthy /health body, or "" while healthy.
std::string Reason(const TestCluster& cluster, int i) {
  test::HttpResponse r = Get(cluster.node(i).client_port, "/health");
  if (r.code == 200) return {};
  const std::string key = "\"reason\":\"";
  const std::size_t at = r.body.find(key);
  return at == std::string::npos ? r.body : r.body.substr(at + key.size());
}

TEST_CASE("/health: a stalled WAL makes the member unhealthy past the stall bound",
          "[integration][metrics][health]") {
  auto cluster = StartCluster(3, kFlags);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  for (int i = 0; i < cluster->size(); ++i) CHECK(Healthy(*cluster, i));

  test::HttpResponse stall = Get(cluster->node(follower).metrics_port, "/failpoint/disk?stall=1");
  REQUIRE(stall.code == 200);
  // A write the follower must make durable; the others commit it without the follower.
  EtcdctlOk(*cluster, {"put", "stalled", "v"}, {}, cluster->node(*leader).client_address());
  // Until the write has waited past the bound, a probe may fail on its linearizable read instead
  // (the follower cannot apply what it has not made durable); then the stall itself is named.
  std::string reason;
  CHECK(Eventually(
      [&] {
        reason = Reason(*cluster, follower);
        return reason.starts_with("WAL STALLED");
      },
      seconds(10), kProcessPoll));
  INFO(reason);
  REQUIRE(reason.starts_with("WAL STALLED"));
  // It says how long the write has waited: past the bound, never before it.
  const long waited_ms = std::stol(reason.substr(std::string("WAL STALLED ").size()));
  CHECK(waited_ms > kStallBound.count());
  CHECK(Get(cluster->node(follower).client_port, "/readyz").code == 503);
  // Alive all the same: a restart is not what a hung disk needs from Kubernetes.
  CHECK(Get(cluster->node(follower).client_port, "/livez").code == 200);
  CHECK(Healthy(*cluster, *leader));

  REQUIRE(Get(cluster->node(follower).metrics_port, "/failpoint/disk?stall=0").code == 200);
  CHECK(Eventually([&] { return Healthy(*cluster, follower); }, seconds(10), kProcessPoll));
  REQUIRE(cluster->CheckAlive().ok());
}

TEST_CASE("/health: a NOSPACE alarm makes members unhealthy until disarmed",
          "[integration][metrics][health]") {
  auto cluster = StartCluster(3);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  auto maintenance = etcdserverpb::Maintenance::NewStub(cluster->Channel(*leader));
  etcdserverpb::AlarmRequest activate;
  activate.set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  activate.set_memberid(cluster->node(*leader).member_id);
  activate.set_alarm(etcdserverpb::NOSPACE);
  etcdserverpb::AlarmResponse response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
  grpc::Status s = maintenance->Alarm(&ctx, activate, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());

  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(Eventually([&] { return Reason(*cluster, i) == "ALARM NOSPACE\"}"; }, seconds(10),
                     kProcessPoll));
    CHECK(Get(cluster->node(i).client_port, "/readyz").code == 503);
  }
  EtcdctlOk(*cluster, {"alarm", "disarm"});
  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(Eventually([&] { return Healthy(*cluster, i); }, seconds(10), kProcessPoll));
  }
}

TEST_CASE("/health: a member without a quorum is unhealthy but live",
          "[integration][metrics][health]") {
  auto cluster = StartCluster(3);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  const int survivor = (*leader + 1) % cluster->size();
  for (int i = 0; i < cluster->size(); ++i) {
    if (i != survivor) REQUIRE(cluster->Stop(i).ok());
  }
  std::string reason;
  CHECK(Eventually(
      [&] {
        reason = Reason(*cluster, survivor);
        return !reason.empty();
      },
      seconds(10), kProcessPoll));
  INFO(reason);
  CHECK((reason.starts_with("RAFT NO LEADER") || reason.starts_with("LINEARIZABLE READ")));
  CHECK(Get(cluster->node(survivor).client_port, "/readyz").code == 503);
  CHECK(Get(cluster->node(survivor).client_port, "/livez").code == 200);
}

}  // namespace
}  // namespace epoch::integration
