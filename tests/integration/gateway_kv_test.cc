// etcd's HTTP/JSON gateway on Epoch's client port: the KV paths, /version, the /v3beta and
// /v3alpha aliases and the error bodies, with the same requests sent to a real etcd 3.4 and the
// answers' shapes (field names, nesting, value types) compared.
#include <catch2/catch.hpp>

#include "gateway_support.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

// The KV calls of etcd's gateway documentation, in order, on a fresh store. Each answer is
// returned for comparison.
std::vector<std::pair<std::string, HttpResult>> KvSession(std::uint16_t port) {
  const std::vector<std::pair<std::string, std::string>> calls = {
      {"/v3/kv/put", R"({"key":"Zm9v","value":"YmFy"})"},
      {"/v3/kv/put", R"({"key":"Zm9v","value":"YmF6","prev_kv":true})"},
      {"/v3beta/kv/range", R"({"key":"Zm9v"})"},
      {"/v3/kv/range", R"({"key":"Zm9v","range_end":"Zm9w","keys_only":true})"},
      {"/v3/kv/range", R"({"key":"Zm9v","count_only":true})"},
      {"/v3/kv/range", R"({"key":"bm9uZQ=="})"},
      {"/v3/kv/txn",
       R"({"compare":[{"key":"Zm9v","result":"EQUAL","target":"VALUE","value":"YmF6"}],)"
       R"("success":[{"request_put":{"key":"Zm9v","value":"cXV4"}},)"
       R"({"request_range":{"key":"Zm9v"}}],"failure":[]})"},
      {"/v3/kv/txn",
       R"({"compare":[{"key":"Zm9v","result":"EQUAL","target":"VERSION","version":"9"}],)"
       R"("failure":[{"request_delete_range":{"key":"Zm9v","prev_kv":true}}]})"},
      {"/v3/kv/put", R"({"key":"YQ==","value":"MQ=="})"},
      {"/v3/kv/deleterange", R"({"key":"YQ==","prev_kv":true})"},
      {"/v3/kv/compaction", R"({"revision":"3"})"},
      {"/v3/kv/compaction", R"({"revision":"100"})"},
      {"/v3/kv/range", R"({"key":"Zm9v","revision":"2"})"},
      {"/v3/kv/range", "{bad"},
      {"/v3/kv/range", R"({"key":"!!"})"},
      {"/v3/kv/range", ""},
  };
  std::vector<std::pair<std::string, HttpResult>> out;
  for (const auto& [path, body] : calls) {
    out.emplace_back(path + " " + body, Curl(port, "POST", path, body));
  }
  return out;
}

TEST_CASE("gateway KV answers have etcd 3.4's statuses and shapes", "[gateway]") {
  ClusterPtr cluster = StartCluster(1);
  RealEtcd etcd;
  const auto epoch = KvSession(cluster->node(0).client_port);
  const auto real = KvSession(etcd.client_port());
  REQUIRE(epoch.size() == real.size());
  for (std::size_t i = 0; i < epoch.size(); ++i) {
    INFO(epoch[i].first << "\nepoch: " << epoch[i].second.code << " " << epoch[i].second.body
                        << "\netcd:  " << real[i].second.code << " " << real[i].second.body);
    CHECK(epoch[i].second.code == real[i].second.code);
    CHECK(JsonShape(epoch[i].second.body) == JsonShape(real[i].second.body));
    // Errors from the server carry etcd's code and message; a body that does not parse carries
    // code 3 and the JSON parser's own words.
    if (epoch[i].second.code != 200) {
      CHECK(JsonField(epoch[i].second.body, "code") == JsonField(real[i].second.body, "code"));
      if (epoch[i].first.find("\"Zm9v\"") != std::string::npos || epoch[i].first.ends_with(" ")) {
        CHECK(JsonField(epoch[i].second.body, "error") == JsonField(real[i].second.body, "error"));
      }
    }
  }
  // Values where both stores must agree: the revisions of the same history.
  CHECK(JsonField(epoch[2].second.body, "kvs") == JsonField(real[2].second.body, "kvs"));
  CHECK(JsonField(epoch[2].second.body, "header.revision") == "\"3\"");
}

TEST_CASE("gateway: /version, aliases, unknown paths and methods, body limits", "[gateway]") {
  ClusterPtr cluster = StartCluster(1);
  const std::uint16_t port = cluster->node(0).client_port;

  const HttpResult version = Curl(port, "GET", "/version");
  CHECK(version.code == 200);
  CHECK(JsonShape(version.body) == "{etcdcluster:s,etcdserver:s,}");
  CHECK(JsonField(version.body, "etcdserver") == "\"3.4.0\"");
  CHECK(JsonField(version.body, "etcdcluster") == "\"3.4.0\"");
  CHECK(Curl(port, "POST", "/version").code == 405);

  PostOk(port, "/v3/kv/put", R"({"key":"YQ==","value":"Yg=="})");
  for (const char* prefix : {"/v3/", "/v3beta/", "/v3alpha/"}) {
    INFO(prefix);
    const std::string body = PostOk(port, std::string(prefix) + "kv/range", R"({"key":"YQ=="})");
    CHECK(JsonField(body, "count") == "\"1\"");
  }
  const HttpResult unknown = Curl(port, "POST", "/v3/kv/nope", "{}");
  CHECK(unknown.code == 404);
  CHECK(unknown.body == "Not Found\n");
  CHECK(Curl(port, "GET", "/v3/kv/range").code == 405);
  // The probes and /metrics are still served on the port, next to the gateway.
  CHECK(Curl(port, "GET", "/health").code == 200);

  // A body past the limit (--max-request-bytes in base64 plus room) is refused before parsing.
  const std::string big = R"({"key":"YQ==","value":")" + std::string(3 << 20, 'A') + "\"}";
  const HttpResult refused = Curl(port, "POST", "/v3/kv/put", big);
  CHECK(refused.code == 413);
  CHECK(JsonField(refused.body, "code") == "8");
  // A request just under --max-request-bytes goes through (the gRPC path's own checks apply).
  const std::string fits = R"({"key":"YQ==","value":")" + Base64(std::string(1 << 20, 'x')) + "\"}";
  PostOk(port, "/v3/kv/put", fits);

  // HTTP/1.1 keep-alive: curl reuses one connection for three requests (0 new connects after
  // the first), a 400 answer included.
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  const test::CommandResult reuse = test::RunCommand({kCurlPath,
                                                      "-s",
                                                      "-o",
                                                      "/dev/null",
                                                      "-w",
                                                      "%{num_connects}",
                                                      "-X",
                                                      "POST",
                                                      url + "/v3/kv/range",
                                                      "--data-binary",
                                                      "{bad",
                                                      "--next",
                                                      "-s",
                                                      "-o",
                                                      "/dev/null",
                                                      "-w",
                                                      "%{num_connects}",
                                                      "-X",
                                                      "POST",
                                                      url + "/v3/kv/range",
                                                      "--data-binary",
                                                      R"({"key":"YQ=="})",
                                                      "--next",
                                                      "-s",
                                                      "-o",
                                                      "/dev/null",
                                                      "-w",
                                                      "%{num_connects}",
                                                      url + "/version"},
                                                     {}, std::chrono::seconds(20));
  CHECK(reuse.out == "100");

  const std::string page = Curl(port, "GET", "/metrics").body;
  CHECK(SampleValue(page, "epoch_gateway_requests_total",
                    {"path=\"/v3/kv/range\"", "code=\"200\""}) == 4);
  CHECK(SampleValue(page, "epoch_gateway_requests_total",
                    {"path=\"/v3/kv/put\"", "code=\"413\""}) == 1);
  CHECK(SampleValue(page, "epoch_gateway_requests_total", {"path=\"other\"", "code=\"404\""}) == 1);
}

}  // namespace
}  // namespace epoch::integration
