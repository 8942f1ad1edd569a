// Hostile peers on a peer port with mTLS (--peer-client-cert-auth, certificates of a test CA):
//
// - an attacker holding a member's own certificate (a compromised member) gets exactly the checks
//   of the plaintext port: every attack of hostile_peer_test.cc is sent over TLS with it and
//   dropped the same way;
// - an attacker without the member's certificate — none, one of another CA, one of the cluster's
//   CA for another name, another member's while claiming to be this one, or plaintext — is
//   refused at the handshake or the hello, before any frame reaches the frame checks.
//
// Clients work throughout, and their history is checked for linearizability.
#include "hostile_peer_support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;
using namespace hostile;

TEST_CASE("hostile peer over TLS: a member's own certificate gets every check of the port",
          "[integration][hostile_peer][peer_tls]") {
  Pki pki;
  ClusterPtr cluster = StartHostileCluster(&pki);
  const Victim v = Survey(*cluster);
  ConcurrentClients clients(*cluster);
  // The attacker holds the certificate of the member it claims to be (the third node).
  const std::string other = cluster->node(v.other).name;
  EveryAttack(*cluster, v, TlsConnector({pki.Cert(other), pki.Key(other)}));
  clients.Finish();
  RequireUnharmed(*cluster, v, "probe/tls-insider");
}

TEST_CASE("hostile peer over TLS: without the member's certificate, no frame is read",
          "[integration][hostile_peer][peer_tls]") {
  Pki pki;
  pki.Issue("intruder", "intruder");
  pki.MakeCa("other-ca");
  ClusterPtr cluster = StartHostileCluster(&pki);
  const Victim v = Survey(*cluster);
  // Each attacker claims to be the third node in its hello.
  const std::string other = cluster->node(v.other).name;
  const std::string leader = cluster->node(v.leader).name;
  pki.Issue("foreign", other, "other-ca");
  ConcurrentClients clients(*cluster);
  struct Outsider {
    const char* what;
    Connector connect;
    const char* refusal;
  };
  const std::vector<Outsider> outsiders = {
      {"no certificate", TlsConnector({}), "tls_handshake"},
      {"a certificate of another CA naming the member",
       TlsConnector({pki.Cert("foreign"), pki.Key("foreign")}), "tls_handshake"},
      {"plaintext", PlaintextConnector(), "tls_handshake"},
      {"a certificate of the cluster's CA for another name",
       TlsConnector({pki.Cert("intruder"), pki.Key("intruder")}), "cert_member_mismatch"},
      {"the leader's certificate, claiming to be another member",
       TlsConnector({pki.Cert(leader), pki.Key(leader)}), "cert_member_mismatch"},
  };
  // One after another against one cluster: each checks the increments of its own counters.
  for (const Outsider& o : outsiders) {
    INFO(o.what);
    RefusedBeforeAnyFrame(*cluster, v, o.connect, o.refusal);
  }
  IdleConnections(*cluster, v);
  clients.Finish();
  RequireUnharmed(*cluster, v, "probe/tls-outsider");
}

}  // namespace
}  // namespace epoch::integration
