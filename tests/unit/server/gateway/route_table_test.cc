// The gateway's route table: etcd 3.4's grpc-gateway paths, their aliases and the gRPC methods
// and message types behind them.
#include "epoch/gateway/route_table.h"

#include <catch2/catch.hpp>
#include <set>
#include <string>

namespace epoch::gateway {
namespace {

TEST_CASE("every gateway path names its gRPC method and types", "[gateway]") {
  struct Expect {
    const char* path;
    const char* method;
    const char* request;
    CallShape shape;
  };
  const Expect expected[] = {
      {"/v3/kv/range", "/etcdserverpb.KV/Range", "etcdserverpb.RangeRequest", CallShape::kUnary},
      {"/v3/kv/compaction", "/etcdserverpb.KV/Compact", "etcdserverpb.CompactionRequest",
       CallShape::kUnary},
      {"/v3/watch", "/etcdserverpb.Watch/Watch", "etcdserverpb.WatchRequest",
       CallShape::kBidiStream},
      {"/v3/kv/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke", "etcdserverpb.LeaseRevokeRequest",
       CallShape::kUnary},
      {"/v3/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive",
       "etcdserverpb.LeaseKeepAliveRequest", CallShape::kBidiStream},
      {"/v3/maintenance/snapshot", "/etcdserverpb.Maintenance/Snapshot",
       "etcdserverpb.SnapshotRequest", CallShape::kServerStream},
      {"/v3/maintenance/transfer-leadership", "/etcdserverpb.Maintenance/MoveLeader",
       "etcdserverpb.MoveLeaderRequest", CallShape::kUnary},
      {"/v3/auth/user/changepw", "/etcdserverpb.Auth/UserChangePassword",
       "etcdserverpb.AuthUserChangePasswordRequest", CallShape::kUnary},
      {"/v3/election/observe", "/v3electionpb.Election/Observe", "v3electionpb.LeaderRequest",
       CallShape::kServerStream},
  };
  for (const Expect& e : expected) {
    INFO(e.path);
    const Route* route = FindRoute(e.path);
    REQUIRE(route != nullptr);
    CHECK(route->method == e.method);
    CHECK(route->request()->full_name() == e.request);
    CHECK(route->shape == e.shape);
  }
}

TEST_CASE("v3beta and v3alpha are aliases of v3; other paths have no route", "[gateway]") {
  const Route* v3 = FindRoute("/v3/kv/put");
  REQUIRE(v3 != nullptr);
  CHECK(FindRoute("/v3beta/kv/put") == v3);
  CHECK(FindRoute("/v3alpha/kv/put") == v3);
  CHECK(FindRoute("/v2/kv/put") == nullptr);
  CHECK(FindRoute("/v3/kv/nope") == nullptr);
  CHECK(FindRoute("/v3/kv/put/") == nullptr);
  CHECK(FindRoute("/metrics") == nullptr);
  CHECK(IsGatewayPath("/v3/kv/nope"));
  CHECK_FALSE(IsGatewayPath("/metrics"));
  CHECK_FALSE(IsGatewayPath("/version"));
}

TEST_CASE("every route's method exists with the route's message types", "[gateway]") {
  std::set<std::string> paths;
  for (const Route& route : Routes()) {
    INFO(route.path);
    CHECK(paths.insert(std::string(route.path)).second);  // no path twice
    // "/pkg.Service/Method" → the method's descriptor, whose types are the route's.
    const std::string method(route.method);
    const std::size_t slash = method.rfind('/');
    const std::string service = method.substr(1, slash - 1);
    const auto* descriptor =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(service);
    REQUIRE(descriptor != nullptr);
    const auto* m = descriptor->FindMethodByName(method.substr(slash + 1));
    REQUIRE(m != nullptr);
    CHECK(m->input_type() == route.request());
    CHECK(m->output_type() == route.response());
    CHECK(m->server_streaming() == (route.shape != CallShape::kUnary));
    CHECK(m->client_streaming() == (route.shape == CallShape::kBidiStream));
  }
  CHECK(paths.size() >= 50);
}

}  // namespace
}  // namespace epoch::gateway
