// The client library's password auth against epochd with a 2-second --auth-token-ttl: the client
// authenticates before its first call and sends its token; a call refused for an expired token is
// repeated with a fresh one without the caller seeing an error (reads and writes); a watch stream
// refused for its token makes the next OpenWatch authenticate again; bad credentials get etcd's
// errors.
#include <fmt/format.h>

#include <thread>

#include "epoch/client/admin.h"
#include "epoch/client/client.h"
#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;
using std::chrono::seconds;

// Users root and worker; role jobs with readwrite on the prefix /jobs/; auth on.
void SetUpAuth(const TestCluster& cluster) {
  EtcdctlOk(cluster, {"user", "add", "root:rootpw"});
  EtcdctlOk(cluster, {"user", "add", "worker:workpw"});
  EtcdctlOk(cluster, {"role", "add", "jobs"});
  EtcdctlOk(cluster, {"role", "grant-permission", "jobs", "--prefix=true", "readwrite", "/jobs/"});
  EtcdctlOk(cluster, {"user", "grant-role", "worker", "jobs"});
  EtcdctlOk(cluster, {"auth", "enable"});
}

ClusterPtr StartAuthCluster() {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--auth-token-ttl", "2"});
  auto cluster = StartCluster(1, std::move(flags));
  SetUpAuth(*cluster);
  return cluster;
}

std::unique_ptr<client::Client> ClientAs(const TestCluster& cluster, const std::string& user,
                                         const std::string& password) {
  client::ClientOptions options;
  options.endpoints = {cluster.node(0).client_address()};
  options.user = user;
  options.password = password;
  auto made = client::Client::Create(std::move(options));
  INFO(made.status().ToString());
  REQUIRE(made.ok());
  return std::move(*made);
}

// A token issued now, through the Auth service directly.
std::string FreshToken(TestCluster& cluster) {
  auto stub = pb::Auth::NewStub(cluster.Channel(0));
  pb::AuthenticateRequest request;
  request.set_name("worker");
  request.set_password("workpw");
  pb::AuthenticateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(5));
  const grpc::Status status = stub->Authenticate(&context, request, &response);
  INFO(status.error_message());
  REQUIRE(status.ok());
  return response.token();
}

// Waits until `token` is refused as expired: every token issued before it is expired too. A use
// of a valid token renews it for the TTL (as etcd's simple tokens), so each probe is made only
// after a full TTL (2 s) and a margin without using it.
void WaitExpired(TestCluster& cluster, const std::string& token) {
  auto kv = pb::KV::NewStub(cluster.Channel(0));
  bool expired = false;
  for (int attempt = 0; attempt < 5 && !expired; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(2));
    context.AddMetadata("token", token);
    pb::RangeRequest request;
    request.set_key("/jobs/a");
    pb::RangeResponse response;
    expired = kv->Range(&context, request, &response).error_message() ==
              etcd_errors::kInvalidAuthToken.message;
  }
  REQUIRE(expired);
}

}  // namespace

TEST_CASE("client: password auth, and an expired token renewed without the caller seeing it",
          "[integration][client][auth]") {
  auto cluster = StartAuthCluster();
  auto worker = ClientAs(*cluster, "worker", "workpw");

  REQUIRE(worker->Put("/jobs/a", "v1").ok());
  CHECK(worker->authentications() == 1);
  Result<etcdserverpb::PutResponse> denied = worker->Put("/other", "x");
  REQUIRE(!denied.ok());
  CHECK(denied.status().Is(ErrorId::kPermissionDenied));

  // The first token expires: the next read is refused once, then repeated with a fresh token.
  WaitExpired(*cluster, FreshToken(*cluster));
  Result<std::optional<mvccpb::KeyValue>> read = worker->Get("/jobs/a");
  INFO(read.status().ToString());
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->value() == "v1");
  CHECK(worker->authentications() == 2);

  // The same for a write (refused before anything was proposed, so sent again).
  WaitExpired(*cluster, FreshToken(*cluster));
  Result<etcdserverpb::PutResponse> put = worker->Put("/jobs/a", "v2");
  INFO(put.status().ToString());
  REQUIRE(put.ok());
  CHECK(worker->authentications() == 3);

  // A watch opened with an expired token: the create is refused, the stream tells the client,
  // and the re-opened stream carries a fresh token.
  WaitExpired(*cluster, FreshToken(*cluster));
  etcdserverpb::WatchCreateRequest create;
  create.set_key("/jobs/");
  create.set_range_end(client::PrefixRangeEnd("/jobs/"));
  {
    auto stale = worker->OpenWatch();
    REQUIRE(stale.ok());
    REQUIRE((*stale)->Create(create).ok());
    Result<etcdserverpb::WatchResponse> refused = (*stale)->Receive();
    REQUIRE(refused.ok());
    CHECK(refused->canceled());
    CHECK(refused->cancel_reason() == etcd_errors::kInvalidAuthToken.message);
  }
  auto watch = worker->OpenWatch();
  REQUIRE(watch.ok());
  CHECK(worker->authentications() == 4);
  REQUIRE((*watch)->Create(create).ok());
  Result<etcdserverpb::WatchResponse> created = (*watch)->Receive();
  REQUIRE(created.ok());
  CHECK(created->created());
  CHECK(!created->canceled());
  REQUIRE(worker->Put("/jobs/b", "w").ok());
  Result<etcdserverpb::WatchResponse> event = (*watch)->Receive();
  REQUIRE(event.ok());
  REQUIRE(event->events_size() == 1);
  CHECK(event->events(0).kv().key() == "/jobs/b");

  // Admin calls over Channel() carry the token too: defragmentation is root's.
  auto root = ClientAs(*cluster, "root", "rootpw");
  Result<etcdserverpb::DefragmentResponse> defragmented = client::Defragment(*root, 0);
  INFO(defragmented.status().ToString());
  CHECK(defragmented.ok());
  Result<etcdserverpb::DefragmentResponse> refused = client::Defragment(*worker, 0);
  REQUIRE(!refused.ok());
  INFO(refused.status().ToString());
  CHECK(refused.status().Is(ErrorId::kPermissionDenied));
}

TEST_CASE("client: bad credentials get etcd's errors", "[integration][client][auth]") {
  auto cluster = StartAuthCluster();
  auto wrong = ClientAs(*cluster, "worker", "nope");
  Result<std::optional<mvccpb::KeyValue>> read = wrong->Get("/jobs/a");
  REQUIRE(!read.ok());
  CHECK(read.status().Is(ErrorId::kAuthFailed));
  CHECK(wrong->authentications() == 0);

  client::ClientOptions anonymous;
  anonymous.endpoints = {cluster->node(0).client_address()};
  auto nobody = client::Client::Create(anonymous);
  REQUIRE(nobody.ok());
  Result<std::optional<mvccpb::KeyValue>> refused = (*nobody)->Get("/jobs/a");
  REQUIRE(!refused.ok());
  CHECK(refused.status().Is(ErrorId::kUserEmpty));

  client::ClientOptions no_password = anonymous;
  no_password.user = "worker";
  CHECK(client::Client::Create(no_password).status().code() == StatusCode::kInvalidArgument);
  client::ClientOptions no_user = anonymous;
  no_user.password = "pw";
  CHECK(client::Client::Create(no_user).status().code() == StatusCode::kInvalidArgument);
}

}  // namespace epoch::integration
