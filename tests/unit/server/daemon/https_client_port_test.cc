// The https:// client port: the routing decision (the ALPN list read from real ClientHellos
// that OpenSSL writes, split, cut short and corrupted), and the port end to end in one process:
// ClientPortMux relays a gRPC client's TLS connection to a gRPC server's loopback TLS listener,
// which does the handshake and sees the client's address (rpc::ClientPeers), not the relay's;
// the relay is forgotten when the client goes; a ClientHello that offers HTTP/1.1 goes to the
// HTTPS side; plaintext is refused.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client_port_mux.h"
#include "epoch/rpc/client_peers.h"
#include "epoch/rpc/tls.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "tls_client_hello.h"
#include "tls_relay.h"

namespace epoch::server {
namespace {

using asio::ip::tcp;
namespace pb = etcdserverpb;
using Verdict = ClientHelloInfo::Verdict;

// The bytes an OpenSSL client sends first, offering `alpn` (none when empty).
std::string OpenSslClientHello(const std::vector<std::string>& alpn) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  std::string wire;
  for (const std::string& name : alpn) {
    wire.push_back(static_cast<char>(name.size()));
    wire += name;
  }
  if (!wire.empty()) {
    REQUIRE(SSL_set_alpn_protos(ssl, reinterpret_cast<const unsigned char*>(wire.data()),
                                static_cast<unsigned>(wire.size())) == 0);
  }
  SSL_set_tlsext_host_name(ssl, "localhost");
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, in, out);
  REQUIRE(SSL_connect(ssl) == -1);  // waits for the server's answer
  std::string hello(static_cast<std::size_t>(BIO_pending(out)), '\0');
  REQUIRE(BIO_read(out, hello.data(), static_cast<int>(hello.size())) ==
          static_cast<int>(hello.size()));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return hello;
}

// The same handshake message in two records, split `at` bytes into it.
std::string InTwoRecords(const std::string& hello, std::size_t at) {
  const std::string message = hello.substr(5);
  const auto record = [&](const std::string& part) {
    std::string r = hello.substr(0, 3);
    r.push_back(static_cast<char>(part.size() >> 8));
    r.push_back(static_cast<char>(part.size() & 0xff));
    return r + part;
  };
  return record(message.substr(0, at)) + record(message.substr(at));
}

TEST_CASE("ClientHello: the ALPN list OpenSSL offers decides gRPC or HTTP", "[daemon][tls]") {
  const std::string grpc = OpenSslClientHello({"grpc-exp", "h2"});
  ClientHelloInfo info = ParseClientHello(grpc);
  REQUIRE(info.verdict == Verdict::kHello);
  CHECK(info.alpn == std::vector<std::string>{"grpc-exp", "h2"});
  CHECK(WantsGrpc(info));
  CHECK(WantsGrpc(ParseClientHello(OpenSslClientHello({"h2"}))));
  // curl offers both: it gets HTTP/1.1 from the gateway.
  info = ParseClientHello(OpenSslClientHello({"h2", "http/1.1"}));
  CHECK(info.alpn == std::vector<std::string>{"h2", "http/1.1"});
  CHECK_FALSE(WantsGrpc(info));
  info = ParseClientHello(OpenSslClientHello({}));
  CHECK(info.verdict == Verdict::kHello);
  CHECK(info.alpn.empty());
  CHECK_FALSE(WantsGrpc(info));
  CHECK(ClassifyTlsBytes(grpc, false) == ClientProtocol::kGrpc);
  CHECK(ClassifyTlsBytes(OpenSslClientHello({"http/1.1"}), false) == ClientProtocol::kHttp);
}

TEST_CASE("ClientHello: a prefix is incomplete, a split across records is whole", "[daemon][tls]") {
  const std::string hello = OpenSslClientHello({"h2"});
  for (std::size_t n = 0; n < hello.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    REQUIRE(ParseClientHello(hello.substr(0, n)).verdict == Verdict::kIncomplete);
  }
  CHECK(ClassifyTlsBytes(hello.substr(0, 100), false) == ClientProtocol::kUnknownYet);
  // A peek that filled its buffer without a whole ClientHello: the HTTPS side takes it.
  CHECK(ClassifyTlsBytes(hello.substr(0, 100), true) == ClientProtocol::kHttp);
  for (std::size_t at : {std::size_t{1}, std::size_t{3}, std::size_t{40}, hello.size() - 6}) {
    INFO("split at " << at);
    const std::string split = InTwoRecords(hello, at);
    ClientHelloInfo info = ParseClientHello(split);
    REQUIRE(info.verdict == Verdict::kHello);
    CHECK(info.alpn == std::vector<std::string>{"h2"});
    CHECK(ParseClientHello(split.substr(0, split.size() - 1)).verdict == Verdict::kIncomplete);
  }
}

TEST_CASE("ClientHello: plaintext, other records and corrupted lengths are not TLS",
          "[daemon][tls]") {
  CHECK(ParseClientHello("GET / HTTP/1.1\r\n").verdict == Verdict::kNotTls);
  CHECK(ParseClientHello("PRI * HTTP/2.0").verdict == Verdict::kNotTls);
  CHECK(ClassifyTlsBytes("GET / HTTP/1.1\r\n", false) == ClientProtocol::kNeither);
  CHECK(ParseClientHello(std::string("\x16\x02", 2)).verdict == Verdict::kNotTls);
  CHECK(ParseClientHello(std::string("\x15\x03\x03\x00\x02\x02\x28", 7)).verdict ==
        Verdict::kNotTls);  // an alert
  std::string hello = OpenSslClientHello({"h2"});
  std::string server_hello = hello;
  server_hello[5] = 2;  // a ServerHello is no ClientHello
  CHECK(ParseClientHello(server_hello).verdict == Verdict::kNotTls);
  std::string empty_record = hello;
  empty_record[3] = empty_record[4] = 0;
  CHECK(ParseClientHello(empty_record).verdict == Verdict::kNotTls);
  std::string huge_record = hello;
  huge_record[3] = '\x7f';
  CHECK(ParseClientHello(huge_record).verdict == Verdict::kNotTls);
  // The handshake length says a byte less than the body: its extensions then overrun.
  std::string short_message = hello;
  const auto byte = [&](std::size_t i) {
    return static_cast<std::size_t>(static_cast<unsigned char>(hello[i]));
  };
  const std::size_t length = (byte(6) << 16 | byte(7) << 8 | byte(8)) - 1;
  short_message[6] = static_cast<char>(length >> 16);
  short_message[7] = static_cast<char>((length >> 8) & 0xff);
  short_message[8] = static_cast<char>(length & 0xff);
  CHECK(ParseClientHello(short_message).verdict == Verdict::kNotTls);
}

TEST_CASE("ClientHello: random corruption never reads outside the bytes", "[daemon][tls]") {
  const std::string hello = OpenSslClientHello({"grpc-exp", "h2", "http/1.1"});
  std::mt19937 rng(7);
  int hellos = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string bytes = hello;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      bytes[rng() % bytes.size()] = static_cast<char>(rng());
    }
    bytes.resize(rng() % (bytes.size() + 1));
    const ClientHelloInfo info = ParseClientHello(bytes);  // asan checks the reads
    hellos += info.verdict == Verdict::kHello ? 1 : 0;
    for (const std::string& name : info.alpn) REQUIRE_FALSE(name.empty());
  }
  CHECK(hellos < 5000);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A KV service whose Range records the caller as gRPC and as rpc::ClientPeers see it.
class RecordingKv final : public pb::KV::Service {
 public:
  grpc::Status Range(grpc::ServerContext* ctx, const pb::RangeRequest*,
                     pb::RangeResponse* response) override {
    std::lock_guard lock(mu);
    grpc_peer = ctx->peer();
    client = peers.Resolve(ctx->peer());
    response->set_count(7);
    return grpc::Status::OK;
  }
  rpc::ClientPeers peers;
  std::mutex mu;
  std::string grpc_peer;
  std::string client;
};

// An io_context on its own thread.
struct Loop {
  Loop() : thread([this] { io.run(); }) {}
  ~Loop() {
    io.stop();
    thread.join();
  }
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread thread;
};

TEST_CASE("https client port: gRPC is relayed and sees the client's address", "[daemon][tls]") {
  test_support::TempDir dir("epoch-relay");
  Result<rpc::TlsFiles> files = rpc::EnsureSelfSignedCertificate(dir.path(), {"127.0.0.1"});
  REQUIRE(files.ok());
  grpc::SslServerCredentialsOptions server_options;
  server_options.pem_key_cert_pairs.push_back(
      {ReadAll(files->key_file), ReadAll(files->cert_file)});
  RecordingKv kv;
  int relay_port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(server_options), &relay_port);
  builder.RegisterService(&kv);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  REQUIRE(server);
  REQUIRE(relay_port != 0);

  Loop mux_loop;
  Loop relay_loop;
  TlsRelays relays(
      relay_loop.io,
      tcp::endpoint(asio::ip::address_v4::loopback(), static_cast<std::uint16_t>(relay_port)),
      kv.peers);
  std::atomic<int> https_connections{0};
  ClientPortMux::TlsRoute route{&relays, [&](tcp::socket s) {
                                  ++https_connections;
                                  std::error_code ignored;
                                  s.close(ignored);
                                }};
  ClientPortMux mux(
      mux_loop.io, *server, kv.peers, [](tcp::socket) { FAIL("no plaintext side"); },
      std::move(route));
  Result<std::uint16_t> port = mux.Listen("127.0.0.1", 0, /*tls=*/true);
  REQUIRE(port.ok());
  const std::size_t relayed_before = kv.peers.size();

  {
    grpc::SslCredentialsOptions client_options;
    client_options.pem_root_certs = ReadAll(files->cert_file);
    auto channel = grpc::CreateChannel(fmt::format("127.0.0.1:{}", *port),
                                       grpc::SslCredentials(client_options));
    auto stub = pb::KV::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::RangeResponse response;
    const grpc::Status status = stub->Range(&ctx, pb::RangeRequest(), &response);
    INFO(status.error_message());
    REQUIRE(status.ok());
    CHECK(response.count() == 7);
    std::lock_guard lock(kv.mu);
    INFO("gRPC saw " << kv.grpc_peer << ", the client is " << kv.client);
    CHECK(kv.grpc_peer.starts_with("ipv4:127.0.0.1:"));
    CHECK(kv.client.starts_with("ipv4:127.0.0.1:"));
    CHECK(kv.client != kv.grpc_peer);  // the relay's socket was looked up
    CHECK(kv.peers.size() == relayed_before + 1);
  }
  // The channel is gone: its relay closes and is forgotten.
  CHECK(test_support::Eventually([&] { return kv.peers.size() == relayed_before; },
                                 std::chrono::seconds(10)));
  CHECK(https_connections == 0);

  // Plaintext HTTP/2 on the TLS port is closed unanswered.
  asio::io_context io;
  tcp::socket plain(io);
  plain.connect(tcp::endpoint(asio::ip::address_v4::loopback(), *port));
  asio::write(plain, asio::buffer(std::string_view("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")));
  std::array<char, 16> buf{};
  std::error_code ec;
  plain.read_some(asio::buffer(buf), ec);
  // Closed with the preface unread: a reset rather than an orderly end.
  CHECK((ec == asio::error::eof || ec == asio::error::connection_reset));
  CHECK(https_connections == 0);

  // A ClientHello that offers HTTP/1.1 (curl's) goes to the HTTPS side.
  tcp::socket curl_like(io);
  curl_like.connect(tcp::endpoint(asio::ip::address_v4::loopback(), *port));
  asio::write(curl_like, asio::buffer(OpenSslClientHello({"h2", "http/1.1"})));
  CHECK(test_support::Eventually([&] { return https_connections == 1; }, std::chrono::seconds(10)));

  server->Shutdown(std::chrono::system_clock::now());
  mux.Stop();
}

}  // namespace
}  // namespace epoch::server
