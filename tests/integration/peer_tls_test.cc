// Peer mTLS on a real cluster: a CA and per-member certificates made with the `openssl` CLI, three
// members started with --peer-cert-file/--peer-key-file/--peer-trusted-ca-file
// --peer-client-cert-auth. Writes replicate; a plaintext peer connection is refused
// (epoch_peer_connections_refused_total{reason="tls_handshake"}); a member restarted with another
// member's certificate cannot rejoin, and the others count it (reason="cert_member_mismatch").
#include <atomic>

#include "hostile_peer_support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;
using hostile::ConnectionsRefused;
using hostile::Pki;

// Connects to the peer port in plaintext, sends a hello, and reports whether the server closed
// the connection within 10 s.
bool PlaintextRefused(std::uint16_t port) {
  hostile::RawPeer peer(port, "127.0.0.1");
  (void)peer.Send(hostile::Hello(1, 1));
  return peer.ClosedWithin(10s);
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
    return pki.PeerFlags(borrow ? "n1" : nodes.at(index).name);
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
