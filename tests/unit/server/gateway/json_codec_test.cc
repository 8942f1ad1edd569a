// The gateway's JSON mapping, as etcd 3.4's grpc-gateway: proto names, int64 as strings, bytes as
// base64, enums by name, unknown fields ignored, defaults left out; error bodies and statuses.
#include "epoch/gateway/json_codec.h"

#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "epoch/gateway/route_table.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::gateway {
namespace {

const Route& RouteOf(const char* path) {
  const Route* route = FindRoute(path);
  REQUIRE(route != nullptr);
  return *route;
}

TEST_CASE("a request body parses as etcd's gateway reads it", "[gateway]") {
  const Route& range = RouteOf("/v3/kv/range");
  Result<std::string> bytes =
      JsonToRequest(range, R"({"key":"Zm9v","range_end":"Zm9w","limit":"5","sort_order":"DESCEND",)"
                           R"("serializable":true,"nosuch":{"a":1}})");
  REQUIRE(bytes.ok());
  etcdserverpb::RangeRequest request;
  REQUIRE(request.ParseFromString(*bytes));
  CHECK(request.key() == "foo");
  CHECK(request.range_end() == "fop");
  CHECK(request.limit() == 5);
  CHECK(request.sort_order() == etcdserverpb::RangeRequest::DESCEND);
  CHECK(request.serializable());

  // lowerCamel names and numbers for int64 are accepted too; an empty body is the empty message.
  bytes = JsonToRequest(range, R"({"rangeEnd":"AA==","limit":7})");
  REQUIRE(bytes.ok());
  REQUIRE(request.ParseFromString(*bytes));
  CHECK(request.range_end() == std::string(1, '\0'));
  CHECK(request.limit() == 7);
  bytes = JsonToRequest(range, " \n");
  REQUIRE(bytes.ok());
  CHECK(bytes->empty());
}

TEST_CASE("a bad request body is InvalidArgument", "[gateway]") {
  const Route& range = RouteOf("/v3/kv/range");
  CHECK(JsonToRequest(range, "{bad").status().code() == StatusCode::kInvalidArgument);
  CHECK(JsonToRequest(range, R"({"key":"!!"})").status().code() == StatusCode::kInvalidArgument);
  CHECK(JsonToRequest(range, R"({"limit":"abc"})").status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("a response prints as etcd's gateway prints it", "[gateway]") {
  etcdserverpb::RangeResponse response;
  response.mutable_header()->set_cluster_id(12585971608760269493ULL);
  response.mutable_header()->set_revision(2);
  auto* kv = response.add_kvs();
  kv->set_key("foo");
  kv->set_value("bar");
  kv->set_create_revision(2);
  response.set_count(1);
  Result<std::string> json = ResponseToJson(RouteOf("/v3/kv/range"), response.SerializeAsString());
  REQUIRE(json.ok());
  CHECK(*json == R"({"header":{"cluster_id":"12585971608760269493","revision":"2"},)"
                 R"("kvs":[{"key":"Zm9v","create_revision":"2","value":"YmFy"}],"count":"1"})");

  etcdserverpb::StatusResponse status;
  status.set_dbsize(20480);
  status.set_version("3.5.0");
  json = ResponseToJson(RouteOf("/v3/maintenance/status"), status.SerializeAsString());
  REQUIRE(json.ok());
  CHECK(*json == R"({"version":"3.5.0","dbSize":"20480"})");  // etcd's proto names its fields so

  etcdserverpb::HashResponse hash;
  hash.set_hash(2578758262U);  // uint32: a number
  json = ResponseToJson(RouteOf("/v3/maintenance/hash"), hash.SerializeAsString());
  REQUIRE(json.ok());
  CHECK(*json == R"({"hash":2578758262})");

  CHECK_FALSE(ResponseToJson(RouteOf("/v3/kv/range"), "\xff\xff\xff").ok());
}

TEST_CASE("streams and errors are framed as grpc-gateway v1 frames them", "[gateway]") {
  CHECK(StreamResult(R"({"created":true})") == "{\"result\":{\"created\":true}}\n");
  const std::string lease(etcd_errors::kLeaseNotFound.message);
  CHECK(ErrorBody(grpc::StatusCode::NOT_FOUND, lease) ==
        R"({"error":")" + lease + R"(","message":")" + lease + R"(","code":5})");
  CHECK(ErrorBody(grpc::StatusCode::INVALID_ARGUMENT, "a \"b\"\n") ==
        R"({"error":"a \"b\"\n","message":"a \"b\"\n","code":3})");
  CHECK(StreamError(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no leader")) ==
        "{\"error\":{\"grpc_code\":14,\"http_code\":503,\"message\":\"no leader\","
        "\"http_status\":\"Service Unavailable\"}}\n");
  CHECK(HttpStatusFromCode(grpc::StatusCode::OK) == 200);
  CHECK(HttpStatusFromCode(grpc::StatusCode::INVALID_ARGUMENT) == 400);
  CHECK(HttpStatusFromCode(grpc::StatusCode::OUT_OF_RANGE) == 400);
  CHECK(HttpStatusFromCode(grpc::StatusCode::FAILED_PRECONDITION) == 412);
  CHECK(HttpStatusFromCode(grpc::StatusCode::UNAUTHENTICATED) == 401);
  CHECK(HttpStatusFromCode(grpc::StatusCode::PERMISSION_DENIED) == 403);
  CHECK(HttpStatusFromCode(grpc::StatusCode::NOT_FOUND) == 404);
  CHECK(HttpStatusFromCode(grpc::StatusCode::RESOURCE_EXHAUSTED) == 429);
  CHECK(HttpStatusFromCode(grpc::StatusCode::UNAVAILABLE) == 503);
  CHECK(HttpStatusFromCode(grpc::StatusCode::DEADLINE_EXCEEDED) == 504);
  CHECK(HttpStatusFromCode(grpc::StatusCode::INTERNAL) == 500);
}

}  // namespace
}  // namespace epoch::gateway
