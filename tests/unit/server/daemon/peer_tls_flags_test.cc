// etcd's peer TLS flags (server/daemon/src/node_flags.h): they reach NodeConfig, contradictory
// combinations are refused, and a file that does not load is refused naming its flag.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "epoch/peer/peer_tls.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "node_flags.h"

namespace epoch::server {
namespace {

Status Finish(const std::vector<std::string>& more, NodeConfig* config) {
  CLI::App app{"epochd"};
  NodeFlags flags;
  AddNodeFlags(app, flags, *config);
  std::vector<std::string> args = {"--name",
                                   "n1",
                                   "--data-dir",
                                   "/tmp/epoch-peer-tls-flags-none",
                                   "--initial-cluster",
                                   "n1=127.0.0.1:2380,n2=127.0.0.1:2381,n3=127.0.0.1:2382",
                                   "--initial-cluster-clients",
                                   "n1=127.0.0.1:2379,n2=127.0.0.1:2389,n3=127.0.0.1:2399"};
  args.insert(args.end(), more.begin(), more.end());
  std::vector<const char*> argv{"epochd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return FinishNodeFlags(flags, *config);
}

struct Files {
  test_support::TempDir dir{"epoch-peer-tls-flags"};
  Files() {
    Result<PemKeyPair> pair = MakeSelfSignedCertificate("n1");
    REQUIRE(pair.ok());
    test_support::WriteFile(dir.Sub("n1.pem"), pair->cert_pem);
    test_support::WriteFile(dir.Sub("n1.key"), pair->key_pem);
  }
};

TEST_CASE("flags: peer TLS files reach the config and load", "[server][config][flags][peer_tls]") {
  Files f;
  NodeConfig c;
  Status s = Finish({"--peer-cert-file", f.dir.Sub("n1.pem"), "--peer-key-file",
                     f.dir.Sub("n1.key"), "--peer-trusted-ca-file", f.dir.Sub("n1.pem"),
                     "--peer-client-cert-auth", "--peer-cert-allowed-cn", "n2"},
                    &c);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(c.peer_tls.cert_file == f.dir.Sub("n1.pem"));
  CHECK(c.peer_tls.client_cert_auth);
  CHECK(c.peer_tls.allowed_cn == "n2");
  PeerTlsOptions o = PeerTlsOptionsOf(c);
  CHECK(o.enabled());
  CHECK(o.self_name == "n1");
  NodeConfig plain;
  REQUIRE(Finish({}, &plain).ok());
  CHECK_FALSE(PeerTlsOptionsOf(plain).enabled());
}

TEST_CASE("flags: a peer TLS file that does not load is refused naming its flag",
          "[server][config][flags][peer_tls]") {
  Files f;
  NodeConfig c;
  Status s = Finish(
      {"--peer-cert-file", f.dir.Sub("nope.pem"), "--peer-key-file", f.dir.Sub("n1.key")}, &c);
  CHECK(s.message().find("--peer-cert-file") != std::string::npos);
  NodeConfig c2;
  s = Finish({"--peer-cert-file", f.dir.Sub("n1.pem"), "--peer-key-file", f.dir.Sub("n1.key"),
              "--peer-trusted-ca-file", f.dir.Sub("nope.pem")},
             &c2);
  CHECK(s.message().find("--peer-trusted-ca-file") != std::string::npos);
}

TEST_CASE("flags: contradictory peer TLS flags are refused", "[server][config][flags][peer_tls]") {
  Files f;
  NodeConfig a, b, d, e;
  CHECK(Finish({"--peer-cert-file", f.dir.Sub("n1.pem")}, &a).message().find("--peer-key-file") !=
        std::string::npos);
  CHECK(Finish({"--peer-auto-tls", "--peer-client-cert-auth"}, &b)
            .message()
            .find("--peer-trusted-ca-file") != std::string::npos);
  CHECK_FALSE(Finish({"--peer-client-cert-auth"}, &d).ok());  // no TLS at all
  Status auto_tls = Finish({"--peer-auto-tls"}, &e);
  INFO(auto_tls.ToString());
  CHECK(auto_tls.ok());
}

}  // namespace
}  // namespace epoch::server
