// --auth-token jwt as etcd 3.4 with keys made by the openssl CLI: a token signed by one member is
// valid on every member (nothing replicated), etcdctl works with it, a forged or tampered token is
// refused, a permission revoked after the token was issued takes effect at once, and each of
// RS256, PS256, ES256 and HS256 issues tokens that verify. A bad key file refuses startup.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "epoch/test_support/temp_dir.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;
using std::chrono::seconds;

const std::vector<std::string> kFastRaft = {
    "--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "15"};

void Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult r = test::RunCommand(argv, {}, std::chrono::seconds(60));
  INFO("openssl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.err);
  REQUIRE(r.exit_code == 0);
}

// Keys for `method` in `dir`; the --auth-token value that uses them.
std::string MakeKeys(const std::string& dir, const std::string& method) {
  const std::string priv = dir + "/" + method + ".key";
  const std::string pub = dir + "/" + method + ".pub";
  if (method == "HS256") {
    Openssl({"rand", "-out", priv, "32"});
    return fmt::format("jwt,priv-key={},sign-method=HS256,ttl=5m", priv);
  }
  if (method == "ES256") {
    Openssl({"ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", priv});
    Openssl({"ec", "-in", priv, "-pubout", "-out", pub});
  } else {
    Openssl({"genrsa", "-out", priv, "2048"});
    Openssl({"rsa", "-in", priv, "-pubout", "-out", pub});
  }
  return fmt::format("jwt,pub-key={},priv-key={},sign-method={},ttl=5m", pub, priv, method);
}

std::vector<std::string> JwtFlags(const std::string& auth_token) {
  std::vector<std::string> flags = kFastRaft;
  flags.push_back("--auth-token");
  flags.push_back(auth_token);
  return flags;
}

grpc::Status Authenticate(TestCluster& cluster, int i, const std::string& name,
                          const std::string& pw, std::string* token) {
  auto stub = pb::Auth::NewStub(cluster.Channel(i));
  pb::AuthenticateRequest req;
  req.set_name(name);
  req.set_password(pw);
  pb::AuthenticateResponse resp;
  grpc::Status last;
  (void)Eventually(
      [&] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
        last = stub->Authenticate(&ctx, req, &resp);
        return last.error_code() != grpc::StatusCode::UNAVAILABLE;
      },
      seconds(15));
  *token = resp.token();
  return last;
}

grpc::Status Get(TestCluster& cluster, int i, const std::string& token, const std::string& key) {
  auto stub = pb::KV::NewStub(cluster.Channel(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
  ctx.AddMetadata("token", token);
  pb::RangeRequest req;
  req.set_key(key);
  pb::RangeResponse resp;
  return stub->Range(&ctx, req, &resp);
}

void SetUpUsers(TestCluster& cluster) {
  EtcdctlOk(cluster, {"user", "add", "root:rootpw"});
  EtcdctlOk(cluster, {"user", "add", "worker:workpw"});
  EtcdctlOk(cluster, {"role", "add", "jobs"});
  EtcdctlOk(cluster, {"role", "grant-permission", "jobs", "--prefix=true", "readwrite", "/jobs/"});
  EtcdctlOk(cluster, {"user", "grant-role", "worker", "jobs"});
  EtcdctlOk(cluster, {"auth", "enable"});
}

TEST_CASE("auth jwt: RS256 tokens valid on every member, checked on the current permissions",
          "[integration][auth]") {
  test_support::TempDir keys("epoch-jwt");
  auto cluster = StartCluster(3, JwtFlags(MakeKeys(keys.path(), "RS256")));
  SetUpUsers(*cluster);
  const std::string denied(etcd_errors::kPermissionDenied.message);
  const std::string invalid(etcd_errors::kInvalidAuthToken.message);

  std::string token;
  grpc::Status s = Authenticate(*cluster, 1, "worker", "workpw", &token);
  INFO(s.error_message());
  REQUIRE(s.ok());
  CHECK(std::count(token.begin(), token.end(), '.') == 2);
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    CHECK(Get(*cluster, i, token, "/jobs/1").ok());
    CHECK(Get(*cluster, i, token, "/other").error_message() == denied);
  }
  // A wrong password issues nothing; a tampered or foreign token is refused.
  std::string none;
  CHECK(Authenticate(*cluster, 0, "worker", "nope", &none).error_message() ==
        etcd_errors::kAuthFailed.message);
  std::string tampered = token;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  CHECK(Get(*cluster, 0, tampered, "/jobs/1").error_message() == invalid);
  CHECK(Get(*cluster, 0, "a.b.c", "/jobs/1").error_message() == invalid);
  // The claims of another user under the same signature: refused.
  const std::size_t dot1 = token.find('.');
  const std::size_t dot2 = token.find('.', dot1 + 1);
  std::string root_token;
  REQUIRE(Authenticate(*cluster, 0, "root", "rootpw", &root_token).ok());
  const std::size_t rdot1 = root_token.find('.');
  const std::size_t rdot2 = root_token.find('.', rdot1 + 1);
  const std::string spliced =
      token.substr(0, dot1) + root_token.substr(rdot1, rdot2 - rdot1) + token.substr(dot2);
  CHECK(Get(*cluster, 0, spliced, "/other").error_message() == invalid);

  // etcdctl authenticates and uses the signed token.
  EtcdctlOk(*cluster, {"--user=worker:workpw", "put", "/jobs/2", "v"});

  // Revoked after the token was issued: refused at once on every member.
  EtcdctlOk(*cluster,
            {"--user=root:rootpw", "role", "revoke-permission", "jobs", "--prefix=true", "/jobs/"});
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    CHECK(Eventually([&] { return Get(*cluster, i, token, "/jobs/1").error_message() == denied; },
                     seconds(5)));
  }
}

TEST_CASE("auth jwt: PS256, ES256 and HS256 tokens verify", "[integration][auth]") {
  test_support::TempDir keys("epoch-jwt");
  for (const std::string method : {"PS256", "ES256", "HS256"}) {
    INFO(method);
    auto cluster = StartCluster(1, JwtFlags(MakeKeys(keys.path(), method)));
    SetUpUsers(*cluster);
    std::string token;
    grpc::Status s = Authenticate(*cluster, 0, "worker", "workpw", &token);
    INFO(s.error_message());
    REQUIRE(s.ok());
    CHECK(Get(*cluster, 0, token, "/jobs/1").ok());
    std::string tampered = token;
    tampered[token.find('.') + 2] = tampered[token.find('.') + 2] == 'A' ? 'B' : 'A';
    CHECK(Get(*cluster, 0, tampered, "/jobs/1").error_message() ==
          etcd_errors::kInvalidAuthToken.message);
  }
}

}  // namespace
}  // namespace epoch::integration
