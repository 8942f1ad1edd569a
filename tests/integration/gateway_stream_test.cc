// etcd's gateway on Epoch: leases (with the keep-alive stream), watch streams that see writes
// from gRPC and the other way round, maintenance and cluster calls, the snapshot stream, and
// auth with the token in the Authorization header; statuses and shapes compared with a real
// etcd 3.4 where both can run the same session.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "gateway_support.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

// Each step's answer, to compare two servers' sessions.
using Session = std::vector<std::pair<std::string, HttpResult>>;

void Step(std::uint16_t port, Session* s, const std::string& path, const std::string& body,
          const std::vector<std::string>& headers = {}) {
  s->emplace_back(path + " " + body, Curl(port, "POST", path, body, headers));
}

void CompareSessions(const Session& epoch, const Session& real) {
  REQUIRE(epoch.size() == real.size());
  for (std::size_t i = 0; i < epoch.size(); ++i) {
    INFO(epoch[i].first << "\nepoch: " << epoch[i].second.code << " " << epoch[i].second.body
                        << "\netcd:  " << real[i].second.code << " " << real[i].second.body);
    CHECK(epoch[i].second.code == real[i].second.code);
    CHECK(JsonShape(epoch[i].second.body) == JsonShape(real[i].second.body));
    if (epoch[i].second.code != 200) {
      CHECK(JsonField(epoch[i].second.body, "code") == JsonField(real[i].second.body, "code"));
      CHECK(JsonField(epoch[i].second.body, "error") == JsonField(real[i].second.body, "error"));
    }
  }
}

// Leases with a chosen ID, so both servers' answers carry the same values.
Session LeaseSession(std::uint16_t port) {
  Session s;
  Step(port, &s, "/v3/lease/grant", R"({"TTL":"60","ID":"4660"})");
  Step(port, &s, "/v3/kv/put", R"({"key":"bA==","value":"dg==","lease":"4660"})");
  Step(port, &s, "/v3/lease/timetolive", R"({"ID":"4660","keys":true})");
  Step(port, &s, "/v3/kv/lease/timetolive", R"({"ID":"4660"})");
  Step(port, &s, "/v3/lease/leases", "{}");
  Step(port, &s, "/v3/kv/lease/leases", "{}");
  // The keep-alive answers once and ends (the body is the whole request stream), as Patroni's
  // lease/keepalive call expects.
  Step(port, &s, "/v3/lease/keepalive", R"({"ID":"4660"})");
  Step(port, &s, "/v3/lease/revoke", R"({"ID":"4660"})");
  Step(port, &s, "/v3/kv/lease/revoke", R"({"ID":"4660"})");
  Step(port, &s, "/v3/kv/range", R"({"key":"bA=="})");
  Step(port, &s, "/v3/lease/grant", R"({"TTL":"60","ID":"4660"})");
  Step(port, &s, "/v3/lease/grant", R"({"TTL":"60","ID":"4660"})");
  return s;
}

TEST_CASE("gateway leases and the keep-alive stream answer as etcd 3.4's", "[gateway]") {
  ClusterPtr cluster = StartCluster(1);
  RealEtcd etcd;
  const Session epoch = LeaseSession(cluster->node(0).client_port);
  const Session real = LeaseSession(etcd.client_port());
  CompareSessions(epoch, real);
  CHECK(JsonField(epoch[6].second.body, "result.ID") == "\"4660\"");
  CHECK(JsonField(epoch[6].second.body, "result.TTL") == "\"60\"");
  CHECK(JsonField(epoch[2].second.body, "keys") == "[\"bA==\",]");
  CHECK(epoch[8].second.code == 404);  // revoked twice: lease not found
}

// Auth enabled through the gateway, then calls without, with a bad and with a good token.
Session AuthSession(std::uint16_t port) {
  Session s;
  Step(port, &s, "/v3/auth/role/add", R"({"name":"root"})");
  Step(port, &s, "/v3/auth/user/add", R"({"name":"root","password":"pw"})");
  Step(port, &s, "/v3/auth/user/grant", R"({"user":"root","role":"root"})");
  Step(port, &s, "/v3/auth/user/add", R"({"name":"alice","password":"pa"})");
  Step(port, &s, "/v3/auth/role/add", R"({"name":"reader"})");
  Step(port, &s, "/v3/auth/role/grant",
       R"({"name":"reader","perm":{"permType":"READ","key":"YQ==","range_end":"Yg=="}})");
  Step(port, &s, "/v3/auth/user/grant", R"({"user":"alice","role":"reader"})");
  Step(port, &s, "/v3/auth/enable", "{}");
  Step(port, &s, "/v3/kv/put", R"({"key":"YQ==","value":"MQ=="})");
  Step(port, &s, "/v3/auth/authenticate", R"({"name":"root","password":"nope"})");
  Step(port, &s, "/v3/auth/authenticate", R"({"name":"root","password":"pw"})");
  const std::string root = JsonField(s.back().second.body, "token");
  REQUIRE(root.size() > 2);
  const std::string root_header = "Authorization: " + root.substr(1, root.size() - 2);
  Step(port, &s, "/v3/kv/put", R"({"key":"YQ==","value":"MQ=="})", {root_header});
  Step(port, &s, "/v3/auth/user/list", "{}", {root_header});
  Step(port, &s, "/v3/auth/role/get", R"({"role":"reader"})", {root_header});
  Step(port, &s, "/v3/auth/authenticate", R"({"name":"alice","password":"pa"})");
  const std::string alice = JsonField(s.back().second.body, "token");
  const std::string alice_header = "Authorization: " + alice.substr(1, alice.size() - 2);
  Step(port, &s, "/v3/kv/range", R"({"key":"YQ=="})", {alice_header});
  Step(port, &s, "/v3/kv/put", R"({"key":"YQ==","value":"Mg=="})", {alice_header});
  Step(port, &s, "/v3/auth/user/changepw", R"({"name":"alice","password":"pb"})", {root_header});
  Step(port, &s, "/v3/auth/user/revoke", R"({"name":"alice","role":"reader"})", {root_header});
  Step(port, &s, "/v3/auth/role/revoke", R"({"role":"reader","key":"YQ==","range_end":"Yg=="})",
       {root_header});
  Step(port, &s, "/v3/auth/role/delete", R"({"role":"reader"})", {root_header});
  Step(port, &s, "/v3/auth/user/delete", R"({"name":"alice"})", {root_header});
  Step(port, &s, "/v3/auth/disable", "{}", {root_header});
  Step(port, &s, "/v3/kv/put", R"({"key":"YQ==","value":"Mw=="})");
  return s;
}

TEST_CASE("gateway auth: the token travels in the Authorization header, as etcd's", "[gateway]") {
  ClusterPtr cluster = StartCluster(1);
  RealEtcd etcd;
  const Session epoch = AuthSession(cluster->node(0).client_port);
  const Session real = AuthSession(etcd.client_port());
  // Tokens differ (both are random), the rest compares.
  CompareSessions(epoch, real);
  CHECK(epoch[8].second.code != 200);   // no token
  CHECK(epoch[11].second.code == 200);  // root's token
  CHECK(epoch[15].second.code == 200);  // alice reads a
  CHECK(epoch[16].second.code == 403);  // and may not write it
}

TEST_CASE("gateway watch streams see gRPC writes, and gRPC watches see gateway writes",
          "[gateway]") {
  ClusterPtr cluster = StartCluster(3);
  const std::uint16_t port = cluster->node(1).client_port;
  {
    CurlStream watch(port, "/v3/watch", R"({"create_request":{"key":"dw==","prev_kv":true}})",
                     cluster->dir() + "/http-watch");
    REQUIRE(watch.WaitFor("\"created\":true"));
    auto kv = etcdserverpb::KV::NewStub(cluster->Channel(2));
    REQUIRE(Put(*kv, "w", "from-grpc").ok());
    REQUIRE(Put(*kv, "w", "again").ok());
    INFO(watch.Output());
    REQUIRE(watch.WaitFor(Base64("again")));
    CHECK(watch.Output().find("\"value\":\"" + Base64("from-grpc") + "\"") != std::string::npos);
    CHECK(watch.Output().find("\"prev_kv\"") != std::string::npos);
    CHECK(watch.Output().starts_with("{\"result\":{\"header\""));
    const std::string page = Curl(port, "GET", "/metrics").body;
    CHECK(SampleValue(page, "epoch_gateway_streams") == 1);
  }
  // The client left: the stream behind it ends.
  CHECK(Eventually(
      [&] { return SampleValue(Curl(port, "GET", "/metrics").body, "epoch_gateway_streams") == 0; },
      seconds(10)));

  auto watch_stub = etcdserverpb::Watch::NewStub(cluster->Channel(0));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(20));
  auto stream = watch_stub->Watch(&context);
  etcdserverpb::WatchRequest create;
  create.mutable_create_request()->set_key("h");
  REQUIRE(stream->Write(create));
  etcdserverpb::WatchResponse response;
  REQUIRE(stream->Read(&response));
  REQUIRE(response.created());
  PostOk(cluster->node(2).client_port, "/v3/kv/put",
         fmt::format(R"({{"key":"{}","value":"{}"}})", Base64("h"), Base64("from-http")));
  REQUIRE(stream->Read(&response));
  REQUIRE(response.events_size() == 1);
  CHECK(response.events(0).kv().value() == "from-http");
  context.TryCancel();
}

TEST_CASE("gateway maintenance, cluster, lock and election paths answer", "[gateway]") {
  ClusterPtr cluster = StartCluster(3);
  const std::uint16_t port = cluster->node(0).client_port;
  PostOk(port, "/v3/kv/put", R"({"key":"YQ==","value":"MQ=="})");

  const std::string members = PostOk(port, "/v3/cluster/member/list", "{}");
  CHECK(JsonShape(members).find("members:[{") != std::string::npos);
  const std::string status = PostOk(port, "/v3/maintenance/status", "{}");
  CHECK(JsonField(status, "leader").size() > 2);
  CHECK(JsonField(status, "version") == "\"3.4.0\"");
  CHECK(JsonField(PostOk(port, "/v3/maintenance/alarm", R"({"action":"GET"})"), "alarms").empty());
  // Epoch's Maintenance.Hash is Unimplemented (HashKV is served); the gateway passes it on.
  const HttpResult hash = Curl(port, "POST", "/v3/maintenance/hash", "{}");
  CHECK(hash.code == 501);
  CHECK(JsonField(hash.body, "code") == "12");
  CHECK(!JsonField(PostOk(port, "/v3/maintenance/hashkv", R"({"revision":"0"})"), "hash").empty());
  PostOk(port, "/v3/maintenance/defragment", "{}");
  const HttpResult remove = Curl(port, "POST", "/v3/cluster/member/remove", R"({"ID":"1"})");
  CHECK(remove.code == 404);
  CHECK(JsonField(remove.body, "code") == "5");
  // A transfer to a member that does not exist; etcd answers it from the leader only.
  CHECK(Curl(port, "POST", "/v3/maintenance/transfer-leadership", R"({"targetID":"1"})").code !=
        200);

  // The snapshot stream: result lines of base64 chunks, the last with nothing remaining.
  const HttpResult snapshot = Curl(port, "POST", "/v3/maintenance/snapshot", "{}");
  REQUIRE(snapshot.code == 200);
  const std::vector<std::string> lines = Lines(snapshot.body);
  REQUIRE(!lines.empty());
  for (const std::string& line : lines) CHECK(line.starts_with("{\"result\":{"));
  CHECK(JsonField(lines.back(), "result.remaining_bytes").empty());
  CHECK(!JsonField(lines.front(), "result.blob").empty());

  // Lock and election through the gateway.
  const std::string lease = JsonField(PostOk(port, "/v3/lease/grant", R"({"TTL":"30"})"), "ID");
  const std::string lock = PostOk(port, "/v3/lock/lock",
                                  fmt::format(R"({{"name":"{}","lease":{}}})", Base64("l"), lease));
  const std::string key = JsonField(lock, "key");
  REQUIRE(key.size() > 2);
  PostOk(port, "/v3/lock/unlock", fmt::format(R"({{"key":{}}})", key));
  const std::string campaign = PostOk(
      port, "/v3/election/campaign",
      fmt::format(R"({{"name":"{}","lease":{},"value":"{}"}})", Base64("e"), lease, Base64("me")));
  CHECK(JsonField(campaign, "leader.name") == "\"" + Base64("e") + "\"");
  const std::string leader =
      PostOk(port, "/v3/election/leader", fmt::format(R"({{"name":"{}"}})", Base64("e")));
  CHECK(JsonField(leader, "kv.value") == "\"" + Base64("me") + "\"");
}

// A client that sends a watch and never reads: once 8 MiB of answers wait for it, the stream is
// cut and counted, and the member goes on serving.
// A plaintext socket connected to 127.0.0.1:port.
int Connect(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  return fd;
}

TEST_CASE("gateway: a watch client that does not read is cut, not buffered without bound",
          "[gateway]") {
  ClusterPtr cluster = StartCluster(1);
  const std::uint16_t port = cluster->node(0).client_port;
  const int fd = Connect(port);
  int small = 4096;  // keep the kernel from absorbing the stream for us
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string body = R"({"create_request":{"key":"cw=="}})";
  const std::string request = fmt::format(
      "POST /v3/watch HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{}", body.size(), body);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  REQUIRE(Eventually(
      [&] { return SampleValue(Curl(port, "GET", "/metrics").body, "epoch_gateway_streams") == 1; },
      seconds(10)));
  // 24 puts of 1 MiB: 32 MiB of JSON events for a reader that takes none.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  const std::string value(1 << 20, 'v');
  for (int i = 0; i < 24; ++i) REQUIRE(Put(*kv, "s", value, nullptr, seconds(20)).ok());
  CHECK(Eventually(
      [&] {
        const std::string page = Curl(port, "GET", "/metrics").body;
        return SampleValue(page, "epoch_gateway_streams_cut_total") == 1 &&
               SampleValue(page, "epoch_gateway_streams") == 0;
      },
      seconds(20)));
  ::close(fd);
  PostOk(port, "/v3/kv/range", R"({"key":"cw==","count_only":true})");
}

// A connected plaintext socket to 127.0.0.1:port that has sent `bytes`.
int ConnectAndSend(std::uint16_t port, const std::string& bytes) {
  const int fd = Connect(port);
  REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
  return fd;
}

TEST_CASE("gateway: connections past the per-address cap get 503 and are counted", "[gateway]") {
  ClusterPtr cluster = StartCluster(1, {"--max-gateway-connections-per-address", "3"});
  const std::uint16_t port = cluster->node(0).client_port;
  // Two clients that start a request and never finish it hold two of the three slots.
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) held.push_back(ConnectAndSend(port, "GET /version HTTP/1.1\r\n"));
  REQUIRE(Eventually(
      [&] {
        const HttpResult page = Curl(port, "GET", "/metrics");
        return page.code == 200 && SampleValue(page.body, "epoch_gateway_connections") == 3;
      },
      seconds(10)));
  // A third holder takes the last slot: the next request is refused before it is read.
  held.push_back(ConnectAndSend(port, "GET /version HTTP/1.1\r\n"));
  HttpResult refused;
  REQUIRE(Eventually(
      [&] {
        refused = Curl(port, "GET", "/version");
        return refused.code == 503;
      },
      seconds(10)));
  CHECK(JsonField(refused.body, "code") == "14");
  CHECK(refused.body.find("--max-gateway-connections-per-address") != std::string::npos);
  // gRPC clients are not gateway connections: they still get served.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  CHECK(Put(*kv, "k", "v", nullptr, seconds(10)).ok());
  // A holder leaves: its slot is free again, and the refusal was counted.
  ::close(held.back());
  held.pop_back();
  std::string page;
  REQUIRE(Eventually(
      [&] {
        const HttpResult r = Curl(port, "GET", "/metrics");
        page = r.body;
        return r.code == 200;
      },
      seconds(10)));
  const std::optional<double> per_address =
      SampleValue(page, "epoch_gateway_connections_refused_total", {"reason=\"per_address\""});
  CHECK(per_address.value_or(0) >= 1);
  CHECK(SampleValue(page, "epoch_gateway_connections_refused_total", {"reason=\"total\""}) == 0);
  for (int fd : held) ::close(fd);
  CHECK(Curl(port, "GET", "/version").code == 200);
}

}  // namespace
}  // namespace epoch::integration
