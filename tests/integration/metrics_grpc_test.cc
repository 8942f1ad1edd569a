// The client port's gRPC metrics that go-grpc-prometheus defines beyond counting calls: every
// method of every served service listed at zero before its first call (as it pre-registers them
// on registration), and Epoch's epoch_fencing_tokens_issued_total, counting the Lock grants and
// Campaign wins answered with a fencing token.
#include <google/protobuf/descriptor.h>

#include "metrics_support.h"
#include "recipe_support.h"
#include "support.h"
#include "v3electionpb/v3election.grpc.pb.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

// Every service epochd serves on the client port.
const std::vector<std::string> kServedServices = {
    "etcdserverpb.KV",    "etcdserverpb.Maintenance", "etcdserverpb.Cluster",
    "etcdserverpb.Lease", "epoch.v1.Lease",           "etcdserverpb.Watch",
    "v3lockpb.Lock",      "v3electionpb.Election",    "etcdserverpb.Auth",
    "epoch.v1.Jobs",
};

std::string Scrape(const TestCluster& cluster, int i) {
  Result<test::HttpResponse> r = cluster.Http(i, "/metrics", seconds(5));
  REQUIRE(r.ok());
  REQUIRE(r->code == 200);
  return r->body;
}

TEST_CASE("grpc metrics: every method of every served service is listed from the start",
          "[integration][metrics][grpc]") {
  auto cluster = StartCluster(1);
  const std::string page = Scrape(*cluster, 0);
  int methods = 0;
  for (const std::string& service : kServedServices) {
    const google::protobuf::ServiceDescriptor* d =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    INFO(service);
    REQUIRE(d != nullptr);
    for (int m = 0; m < d->method_count(); ++m) {
      const std::vector<std::string> labels = {
          fmt::format("grpc_method=\"{}\"", d->method(m)->name()),
          fmt::format("grpc_service=\"{}\"", service)};
      INFO(d->method(m)->name());
      CHECK(SampleValue(page, "grpc_server_started_total", labels).has_value());
      for (const char* code : {"OK", "Unavailable", "Unauthenticated"}) {
        std::vector<std::string> with_code = labels;
        with_code.push_back(fmt::format("grpc_code=\"{}\"", code));
        CHECK(SampleValue(page, "grpc_server_handled_total", with_code).has_value());
      }
      CHECK(SampleValue(page, "grpc_server_handling_seconds_count", labels).has_value());
      ++methods;
    }
  }
  CHECK(methods > 30);
  // Nothing has called these yet: listed, at zero.
  const std::vector<std::string> compact = {"grpc_method=\"Compact\"",
                                            "grpc_service=\"etcdserverpb.KV\""};
  CHECK(SampleValue(page, "grpc_server_started_total", compact) == 0.0);
  CHECK(SampleSum(page, "grpc_server_handled_total", compact) == 0.0);
  const std::vector<std::string> campaign = {"grpc_method=\"Campaign\"", "grpc_type=\"unary\""};
  CHECK(SampleValue(page, "grpc_server_started_total", campaign) == 0.0);
  const std::vector<std::string> watch = {"grpc_method=\"Watch\"", "grpc_type=\"bidi_stream\""};
  CHECK(SampleValue(page, "grpc_server_started_total", watch) == 0.0);
  // A call moves its own series only.
  EtcdctlOk(*cluster, {"compaction", "1"});
  const std::string after = Scrape(*cluster, 0);
  CHECK(SampleValue(after, "grpc_server_started_total", compact) == 1.0);
  CHECK(SampleValue(after, "grpc_server_started_total", campaign) == 0.0);
}

TEST_CASE("epoch_fencing_tokens_issued_total counts Lock grants and Campaign wins",
          "[integration][metrics][lock]") {
  auto cluster = StartCluster(1);
  CHECK(cluster->Metric(0, "epoch_fencing_tokens_issued_total") == 0.0);

  const std::int64_t lease = GrantLease(cluster->Channel(0), 30);
  REQUIRE(lease != 0);
  LockOutcome locked = Lock(cluster->Channel(0), "fenced/a", lease);
  REQUIRE(locked.status.ok());
  REQUIRE(locked.token > 0);
  CHECK(cluster->Metric(0, "epoch_fencing_tokens_issued_total") == 1.0);
  // A refused Lock issues no token.
  LockOutcome refused = Lock(cluster->Channel(0), "fenced/b", 0x7777);
  REQUIRE(refused.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(cluster->Metric(0, "epoch_fencing_tokens_issued_total") == 1.0);

  auto election = v3electionpb::Election::NewStub(cluster->Channel(0));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(10)));
  v3electionpb::CampaignRequest request;
  request.set_name("fenced-election");
  request.set_lease(lease);
  request.set_value("me");
  v3electionpb::CampaignResponse response;
  grpc::Status won = election->Campaign(&ctx, request, &response);
  INFO(won.error_message());
  REQUIRE(won.ok());
  CHECK(TokenFrom(ctx) > locked.token);
  CHECK(cluster->Metric(0, "epoch_fencing_tokens_issued_total") == 2.0);
  // Unlock issues none.
  REQUIRE(Unlock(cluster->Channel(0), locked.key).ok());
  CHECK(cluster->Metric(0, "epoch_fencing_tokens_issued_total") == 2.0);
}

}  // namespace
}  // namespace epoch::integration
