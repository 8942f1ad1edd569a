// Peer mTLS on a real cluster: a CA and per-member certificates made with the `openssl` CLI, three
// members started with --peer-cert-file/--peer-key-file/--peer-trusted-ca-file
// --peer-client-cert-auth. Writes replicate; a plaintext peer connection is refused
// (epoch_peer_connections_refused_total{reason="tls_handshake"}); a member restarted with another
// member's certificate cannot rejoin, and the others count it (reason="cert_member_mismatch").
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

#include "epoch/test_support/temp_dir.h"
#include "support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;

const char* const kOpenssl = "/usr/bin/openssl";

void Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kOpenssl};
  argv.insert(argv.end(), args.begin(), args.end());
  test::CommandResult r = test::RunCommand(argv, {}, 60s);
  INFO("openssl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  REQUIRE(r.exit_code == 0);
}

// A CA (ca.pem) and, for n1..n3, a key and a certificate it signed with CN and SAN DNS = the
// member's name.
struct Pki {
  test_support::TempDir dir{"epoch-peer-pki"};
  Pki() {
    Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", dir.Sub("ca.key"), "-out", dir.Sub("ca.pem"), "-days", "2", "-subj",
             "/CN=epoch-test-ca"});
    for (const char* name : {"n1", "n2", "n3"}) {
      const std::string base = dir.Sub(name);
      WriteFile(base + ".ext", fmt::format("subjectAltName=DNS:{},IP:127.0.0.1\n", name));
      Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
               base + ".key", "-out", base + ".csr", "-subj", fmt::format("/CN={}", name)});
      Openssl({"x509", "-req", "-in", base + ".csr", "-CA", dir.Sub("ca.pem"), "-CAkey",
               dir.Sub("ca.key"), "-CAcreateserial", "-out", base + ".pem", "-days", "2",
               "-extfile", base + ".ext"});
    }
  }
  std::vector<std::string> Flags(const std::string& cert_of) const {
    return {"--peer-cert-file",        dir.Sub(cert_of + ".pem"), "--peer-key-file",
            dir.Sub(cert_of + ".key"), "--peer-trusted-ca-file",  dir.Sub("ca.pem"),
            "--peer-client-cert-auth"};
  }
};

std::uint64_t ConnectionsRefused(const TestCluster& cluster, int i, const std::string& reason) {
  auto page = cluster.Http(i, "/metrics");
  if (!page.ok()) return 0;
  const std::string prefix =
      fmt::format("epoch_peer_connections_refused_total{{reason=\"{}\"}} ", reason);
  const auto at = page->body.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoull(page->body.substr(at + prefix.size()));
}

// Connects to the peer port in plaintext, sends a hello-sized frame, and reports whether the
// server closed the connection within 10 s.
bool PlaintextRefused(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string hello = std::string("\0\0\0\x18", 4) + "EPOCHP1\n" + std::string(16, '\1');
    (void)::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    pollfd p{fd, POLLIN, 0};
    char buf[256];
    // The server answers a non-TLS record with an alert or nothing, then closes: read to EOF.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        closed = true;
        break;
      }
    }
  }
  ::close(fd);
  return closed;
}

TEST_CASE(
    "peer mTLS: a cluster replicates over TLS; plaintext and borrowed certificates are "
    "refused",
    "[integration][peer_tls]") {
  Pki pki;
  std::atomic<bool> n3_borrows_n1{false};
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = 3;
  options.node_flags = [&](int index, const std::vector<test::NodeInfo>& nodes) {
    const bool borrow = index == 2 && n3_borrows_n1.load();
    return pki.Flags(borrow ? "n1" : nodes.at(index).name);
  };
  auto started = TestCluster::Start(options);
  INFO("starting the cluster: " << started.status().ToString());
  REQUIRE(started.ok());
  ClusterPtr cluster(started->release());
  REQUIRE(cluster->WaitHealthy(20s).ok());

  // Writes replicate to every member over the TLS links.
  EtcdctlOk(*cluster, {"put", "tls/key", "v1"});
  for (int i = 0; i < cluster->size(); ++i) {
    INFO("node " << i);
    CHECK(Eventually(
        [&] {
          test::CommandResult r =
              cluster->Etcdctl({"get", "tls/key", "--print-value-only", "--consistency=s"}, {},
                               cluster->node(i).client_address());
          return r.exit_code == 0 && r.out == "v1\n";
        },
        10s, 50ms));
  }

  // A plaintext connection to a TLS peer port is closed and counted.
  const std::uint64_t before = ConnectionsRefused(*cluster, 0, "tls_handshake");
  CHECK(PlaintextRefused(cluster->node(0).peer_port));
  CHECK(Eventually([&] { return ConnectionsRefused(*cluster, 0, "tls_handshake") > before; }, 10s,
                   20ms));

  // n3 restarted with n1's certificate (signed by the same CA) cannot rejoin: n1 and n2 refuse
  // its hello (the certificate names n1, not n3) and its server certificate when they dial it.
  REQUIRE(cluster->Stop(2).ok());
  n3_borrows_n1 = true;
  REQUIRE(cluster->StartNode(2).ok());
  for (int i : {0, 1}) {
    INFO("node " << i);
    CHECK(Eventually([&] { return ConnectionsRefused(*cluster, i, "cert_member_mismatch") >= 2; },
                     20s, 50ms));
  }
  auto ready = cluster->Http(2, "/ready");
  CHECK((!ready.ok() || ready->code != 200));
  // n1 and n2 still form a quorum and serve writes.
  EtcdctlOk(*cluster, {"put", "tls/after", "v2"}, {}, cluster->Endpoints({0, 1}));
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
