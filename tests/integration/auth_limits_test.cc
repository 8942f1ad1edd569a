// Simple tokens and Authenticate limits on a live member: --auth-token-ttl honoured, a token
// renewed by each use (etcd's simple-token TTL keeper) and expired once unused for a TTL; failed
// Authenticate attempts limited per user and per address with RESOURCE_EXHAUSTED, counted in
// /metrics with etcd's auth revision gauge.
#include <fmt/format.h>

#include <thread>

#include "epoch/etcd_errors.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::vector<std::string> kFastRaft = {
    "--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "15"};

std::vector<std::string> With(std::vector<std::string> flags) {
  flags.insert(flags.begin(), kFastRaft.begin(), kFastRaft.end());
  return flags;
}

grpc::Status Authenticate(TestCluster& cluster, const std::string& name, const std::string& pw,
                          std::string* token = nullptr) {
  auto stub = pb::Auth::NewStub(cluster.Channel(0));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
  pb::AuthenticateRequest req;
  req.set_name(name);
  req.set_password(pw);
  pb::AuthenticateResponse resp;
  grpc::Status s = stub->Authenticate(&ctx, req, &resp);
  if (token != nullptr) *token = resp.token();
  return s;
}

grpc::Status Get(TestCluster& cluster, const std::string& token) {
  auto stub = pb::KV::NewStub(cluster.Channel(0));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
  ctx.AddMetadata("token", token);
  pb::RangeRequest req;
  req.set_key("k");
  pb::RangeResponse resp;
  return stub->Range(&ctx, req, &resp);
}

void EnableAuth(TestCluster& cluster) {
  EtcdctlOk(cluster, {"user", "add", "root:rootpw"});
  EtcdctlOk(cluster, {"auth", "enable"});
}

TEST_CASE("auth: a simple token lives --auth-token-ttl after its last use", "[integration][auth]") {
  auto cluster = StartCluster(1, With({"--auth-token-ttl", "2"}));
  EnableAuth(*cluster);
  std::string token;
  REQUIRE(Authenticate(*cluster, "root", "rootpw", &token).ok());

  // Used every 300 ms for twice the TTL: valid throughout.
  const auto used_until = std::chrono::steady_clock::now() + seconds(4);
  int uses = 0;
  while (std::chrono::steady_clock::now() < used_until && uses < 100) {
    grpc::Status s = Get(*cluster, token);
    INFO("use " << uses << ": " << s.error_message());
    REQUIRE(s.ok());
    ++uses;
    std::this_thread::sleep_for(milliseconds(300));
  }
  // Left unused for more than a TTL: invalid. (Polling with the token would renew it, so the
  // test lets the time pass; what is tested is the passing of time.)
  std::this_thread::sleep_for(milliseconds(3500));
  CHECK(Get(*cluster, token).error_message() == etcd_errors::kInvalidAuthToken.message);
}

TEST_CASE("auth: failed Authenticate attempts are rate-limited and counted",
          "[integration][auth]") {
  auto cluster = StartCluster(1, With({"--auth-failure-burst", "3", "--auth-failure-refill-ms",
                                       "60000", "--auth-failure-backoff-max-ms", "600000"}));
  EnableAuth(*cluster);
  const std::string failed(etcd_errors::kAuthFailed.message);
  const std::string limited(etcd_errors::kAuthRateLimited.message);
  for (int i = 0; i < 3; ++i) {
    grpc::Status s = Authenticate(*cluster, "root", "guess" + std::to_string(i));
    CHECK(s.error_message() == failed);
  }
  // The burst is spent: refused without a check, even with the right password.
  grpc::Status refused = Authenticate(*cluster, "root", "rootpw");
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(refused.error_message() == limited);
  // The address is spent too: another user from it is refused.
  CHECK(Authenticate(*cluster, "ghost", "pw").error_message() == limited);

  Result<test::HttpResponse> page = cluster->Http(0, "/metrics");
  REQUIRE(page.ok());
  CHECK(SampleValue(page->body, "epoch_auth_failures_total", {"reason=\"bad_password\""}) == 3);
  CHECK(SampleValue(page->body, "epoch_auth_failures_total", {"reason=\"unknown_user\""}) == 0);
  CHECK(SampleValue(page->body, "epoch_auth_rate_limited_total") == 2);
  std::optional<double> revision = SampleValue(page->body, "etcd_debugging_auth_revision");
  REQUIRE(revision);
  CHECK(*revision >= 3);  // user add, root role granted, enabled
}

}  // namespace
}  // namespace epoch::integration
