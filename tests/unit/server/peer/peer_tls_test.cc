// Peer TLS: the certificate checks (names, member, allowed CN/hostname), loading errors that name
// their flag, and PeerTransport over mutual TLS on loopback (no sleeps: waits have deadlines).
#include "epoch/peer/peer_tls.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "epoch/peer/peer_transport.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;

X509Ptr CertFor(std::string_view name) {
  Result<PemKeyPair> pair = MakeSelfSignedCertificate(name);
  REQUIRE(pair.ok());
  X509Ptr cert = ParseCertificatePem(pair->cert_pem);
  REQUIRE(cert != nullptr);
  return cert;
}

TEST_CASE("a certificate names a member by its CN or a SAN DNS name", "[peer_tls]") {
  X509Ptr n1 = CertFor("n1");
  const std::vector<std::string> names = CertificateNames(n1.get());
  REQUIRE(names.size() >= 2);
  CHECK(names.front() == "n1");  // the CN first, then the SAN DNS names
  CHECK(CertificateNamesMember(n1.get(), "n1"));
  CHECK(CertificateNamesMember(n1.get(), "localhost"));  // a SAN DNS name
  CHECK_FALSE(CertificateNamesMember(n1.get(), "n2"));
  CHECK_FALSE(CertificateNamesMember(n1.get(), "n"));  // exact, not a prefix
  CHECK_FALSE(CertificateNamesMember(n1.get(), "n11"));
  CHECK_FALSE(CertificateNamesMember(n1.get(), ""));
  CHECK_FALSE(CertificateNamesMember(nullptr, "n1"));
}

TEST_CASE("allowed CN and hostname are checked as etcd does", "[peer_tls]") {
  X509Ptr n1 = CertFor("n1");
  CHECK(CertificateAllowed(n1.get(), "", ""));
  CHECK(CertificateAllowed(n1.get(), "n1", ""));
  CHECK_FALSE(CertificateAllowed(n1.get(), "n2", ""));
  CHECK(CertificateAllowed(n1.get(), "", "localhost"));
  CHECK(CertificateAllowed(n1.get(), "", "n1"));
  CHECK_FALSE(CertificateAllowed(n1.get(), "", "other.example"));
  CHECK_FALSE(CertificateAllowed(nullptr, "n1", ""));
  CHECK(CertificateAllowed(nullptr, "", ""));
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

// Self-signed certificates for n1..n3 in a temp dir; ca.pem trusts all three.
struct Certs {
  test_support::TempDir dir{"epoch-peer-tls"};
  Certs() {
    std::string ca;
    for (const char* name : {"n1", "n2", "n3"}) {
      Result<PemKeyPair> pair = MakeSelfSignedCertificate(name);
      REQUIRE(pair.ok());
      WriteFile(dir.Sub(std::string(name) + ".pem"), pair->cert_pem);
      WriteFile(dir.Sub(std::string(name) + ".key"), pair->key_pem);
      ca += pair->cert_pem;
    }
    WriteFile(dir.Sub("ca.pem"), ca);
  }
  PeerTlsOptions For(const std::string& name) const {
    PeerTlsOptions o;
    o.cert_file = dir.Sub(name + ".pem");
    o.key_file = dir.Sub(name + ".key");
    o.trusted_ca_file = dir.Sub("ca.pem");
    o.client_cert_auth = true;
    return o;
  }
};

TEST_CASE("a peer TLS file that does not load names its flag", "[peer_tls]") {
  Certs certs;
  PeerTlsOptions o = certs.For("n1");
  o.cert_file = certs.dir.Sub("missing.pem");
  Result<std::shared_ptr<PeerTls>> tls = PeerTls::Create(o);
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.status().message().find("--peer-cert-file") != std::string::npos);

  o = certs.For("n1");
  o.key_file = certs.dir.Sub("n2.key");  // not the certificate's key
  tls = PeerTls::Create(o);
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.status().message().find("--peer-key-file") != std::string::npos);

  o = certs.For("n1");
  o.trusted_ca_file = certs.dir.Sub("n1.key");
  tls = PeerTls::Create(o);
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.status().message().find("--peer-trusted-ca-file") != std::string::npos);

  REQUIRE(PeerTls::Create(certs.For("n1")).ok());
}

// A transport with peer TLS presenting `cert_name`'s certificate as member `id`.
struct TlsNode {
  asio::io_context io;
  PeerDrops drops;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<NodeId, std::string>> frames;
  std::unique_ptr<PeerTransport> transport;
  std::thread thread;

  TlsNode(NodeId id, std::shared_ptr<PeerTls> tls,
          std::function<void(PeerTransportOptions&)> tweak = {}) {
    PeerTransportOptions opts;
    opts.self = id;
    opts.cluster_id = 7;
    opts.drops = &drops;
    opts.tls = std::move(tls);
    opts.member_name = [](NodeId n) { return "n" + std::to_string(n.value()); };
    if (tweak) tweak(opts);
    transport = std::make_unique<PeerTransport>(
        io, opts,
        [this](NodeId from, std::string f) {
          std::lock_guard lock(mu);
          frames.emplace_back(from, std::move(f));
          cv.notify_all();
        },
        [](NodeId) {});
    REQUIRE(transport->Start().ok());
    thread = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  ~TlsNode() {
    transport->Stop();
    io.stop();
    thread.join();
  }
  bool WaitFor(std::size_t count) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return frames.size() >= count; });
  }
  std::size_t Received() {
    std::lock_guard lock(mu);
    return frames.size();
  }
  PeerAddress Address() const { return {"127.0.0.1", transport->port()}; }
};

std::shared_ptr<PeerTls> Tls(const PeerTlsOptions& o) {
  Result<std::shared_ptr<PeerTls>> tls = PeerTls::Create(o);
  REQUIRE(tls.ok());
  return *tls;
}

TEST_CASE("frames cross a mutual TLS link both ways", "[peer_tls][transport]") {
  Certs certs;
  TlsNode a(NodeId(1), Tls(certs.For("n1"))), b(NodeId(2), Tls(certs.For("n2")));
  a.transport->SetPeer(NodeId(2), b.Address());
  b.transport->SetPeer(NodeId(1), a.Address());
  for (int i = 0; i < 100; ++i) a.transport->Send(NodeId(2), "to-b-" + std::to_string(i));
  b.transport->Send(NodeId(1), "to-a");
  REQUIRE(b.WaitFor(100));
  REQUIRE(a.WaitFor(1));
  std::lock_guard lock(b.mu);
  CHECK(b.frames.front().first == NodeId(1));
  CHECK(b.frames.back().second == "to-b-99");
  CHECK(b.drops.Get(ConnectionRefusal::kTlsHandshake) == 0);
}

TEST_CASE("peer auto TLS: links encrypt with self-signed certificates", "[peer_tls][transport]") {
  PeerTlsOptions o1, o2;
  o1.auto_tls = o2.auto_tls = true;
  o1.self_name = "n1";
  o2.self_name = "n2";
  std::shared_ptr<PeerTls> tls1 = Tls(o1);
  CHECK_FALSE(tls1->verifies_peers());
  TlsNode a(NodeId(1), tls1), b(NodeId(2), Tls(o2));
  a.transport->SetPeer(NodeId(2), b.Address());
  a.transport->Send(NodeId(2), "over-auto-tls");
  REQUIRE(b.WaitFor(1));
  CHECK(b.drops.Get(ConnectionRefusal::kTlsHandshake) == 0);
}

TEST_CASE("a plaintext peer connection to a TLS port is refused and counted",
          "[peer_tls][transport]") {
  Certs certs;
  TlsNode b(NodeId(2), Tls(certs.For("n2")));
  asio::io_context io;
  PeerTransportOptions opts;
  opts.self = NodeId(1);
  opts.cluster_id = 7;
  PeerTransport plain(
      io, opts, [](NodeId, std::string) {}, [](NodeId) {});
  REQUIRE(plain.Start().ok());
  plain.SetPeer(NodeId(2), b.Address());
  plain.Send(NodeId(2), "hello?");
  std::thread runner([&] { io.run_for(10s); });
  CHECK(test_support::Eventually([&] { return b.drops.Get(ConnectionRefusal::kTlsHandshake) > 0; },
                                 10s));
  plain.Stop();
  io.stop();
  runner.join();
  CHECK(b.Received() == 0);
}

TEST_CASE("a member presenting another member's certificate is refused on both sides",
          "[peer_tls][transport]") {
  Certs certs;
  TlsNode a(NodeId(1), Tls(certs.For("n1"))), b(NodeId(2), Tls(certs.For("n2")));
  // Node 3 holds n1's certificate: trusted by the CA, but it does not name n3.
  TlsNode impostor(NodeId(3), Tls(certs.For("n1")));
  impostor.transport->SetPeer(NodeId(2), b.Address());
  impostor.transport->Send(NodeId(2), "forged");
  b.transport->SetPeer(NodeId(3), impostor.Address());
  b.transport->Send(NodeId(3), "to-3");
  CHECK(test_support::Eventually(
      [&] { return b.drops.Get(ConnectionRefusal::kCertMemberMismatch) >= 2; }, 10s));
  CHECK(b.Received() == 0);
  CHECK(impostor.Received() == 0);
  // The genuine n1 still gets through.
  a.transport->SetPeer(NodeId(2), b.Address());
  a.transport->Send(NodeId(2), "genuine");
  REQUIRE(b.WaitFor(1));
}

TEST_CASE("the dialler refuses a peer whose certificate names another member",
          "[peer_tls][transport]") {
  Certs certs;
  TlsNode b(NodeId(2), Tls(certs.For("n2")));
  // Node 3 holds n1's certificate (trusted by the CA) and never dials: only b's check can act.
  TlsNode impostor(NodeId(3), Tls(certs.For("n1")));
  b.transport->SetPeer(NodeId(3), impostor.Address());
  b.transport->Send(NodeId(3), "to-3");
  CHECK(test_support::Eventually(
      [&] { return b.drops.Get(ConnectionRefusal::kCertMemberMismatch) >= 2; }, 10s));
  CHECK(b.transport->Stats(NodeId(3)).connect_failures >= 2);  // refused, redialled, refused
  CHECK_FALSE(b.transport->Stats(NodeId(3)).connected);
  CHECK(impostor.Received() == 0);  // no hello, no frame ever left b
  CHECK(impostor.drops.Get(ConnectionRefusal::kCertMemberMismatch) == 0);
}

TEST_CASE("a dialled peer with a certificate the CA did not sign fails the handshake, counted",
          "[peer_tls][transport]") {
  Certs certs;
  TlsNode b(NodeId(2), Tls(certs.For("n2")));
  // A node 3 whose certificate (names n3, self-signed) is not in b's trusted CA file.
  Result<PemKeyPair> rogue = MakeSelfSignedCertificate("n3");
  REQUIRE(rogue.ok());
  WriteFile(certs.dir.Sub("rogue.pem"), rogue->cert_pem);
  WriteFile(certs.dir.Sub("rogue.key"), rogue->key_pem);
  PeerTlsOptions rogue_options = certs.For("n3");
  rogue_options.cert_file = certs.dir.Sub("rogue.pem");
  rogue_options.key_file = certs.dir.Sub("rogue.key");
  TlsNode n3(NodeId(3), Tls(rogue_options));
  b.transport->SetPeer(NodeId(3), n3.Address());
  b.transport->Send(NodeId(3), "to-3");
  CHECK(test_support::Eventually(
      [&] { return b.drops.Get(ConnectionRefusal::kDialTlsHandshake) >= 2; }, 10s));
  CHECK_FALSE(b.transport->Stats(NodeId(3)).connected);
  CHECK(n3.Received() == 0);
  // The rogue's acceptor sees the handshake b aborted.
  CHECK(test_support::Eventually(
      [&] { return n3.drops.Get(ConnectionRefusal::kTlsHandshake) >= 1; }, 10s));
}

TEST_CASE("a client certificate outside --peer-cert-allowed-cn is refused",
          "[peer_tls][transport]") {
  Certs certs;
  PeerTlsOptions only_n1 = certs.For("n2");
  only_n1.allowed_cn = "n1";
  TlsNode b(NodeId(2), Tls(only_n1));
  TlsNode a(NodeId(1), Tls(certs.For("n1"))), c(NodeId(3), Tls(certs.For("n3")));
  c.transport->SetPeer(NodeId(2), b.Address());
  c.transport->Send(NodeId(2), "from-3");
  CHECK(test_support::Eventually(
      [&] { return b.drops.Get(ConnectionRefusal::kCertNotAllowed) > 0; }, 10s));
  a.transport->SetPeer(NodeId(2), b.Address());
  a.transport->Send(NodeId(2), "from-1");
  REQUIRE(b.WaitFor(1));
  std::lock_guard lock(b.mu);
  for (const auto& [from, frame] : b.frames) CHECK(from == NodeId(1));
}

TEST_CASE("a dialled peer that never completes the TLS handshake is redialled",
          "[peer_tls][transport]") {
  Certs certs;
  // A listener that accepts and never says a word.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::uint16_t port = acceptor.local_endpoint().port();
  std::vector<asio::ip::tcp::socket> held;
  std::function<void()> accept = [&] {
    acceptor.async_accept([&](std::error_code ec, asio::ip::tcp::socket socket) {
      if (ec) return;
      held.push_back(std::move(socket));
      accept();
    });
  };
  accept();
  auto guard = asio::make_work_guard(io);
  std::thread runner([&] { io.run(); });
  {
    TlsNode a(NodeId(1), Tls(certs.For("n1")),
              [](PeerTransportOptions& o) { o.hello_timeout = 200ms; });
    a.transport->SetPeer(NodeId(2), {"127.0.0.1", port});
    CHECK(test_support::Eventually(
        [&] { return a.transport->Stats(NodeId(2)).connect_failures >= 2; }, 10s));
    CHECK_FALSE(a.transport->Stats(NodeId(2)).connected);
    CHECK(a.drops.Get(ConnectionRefusal::kDialTlsHandshake) >= 2);  // each timeout counted
  }
  io.stop();
  runner.join();
}

}  // namespace
}  // namespace epoch::server
