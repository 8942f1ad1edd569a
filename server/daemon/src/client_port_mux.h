// ClientPortMux: gRPC and HTTP/1 on one client port, as etcd serves its JSON gateway, /metrics and
// /health next to its gRPC API (etcd multiplexes with cmux). It accepts the client port's
// connections itself and peeks at their first bytes without consuming them.
//
// A plaintext (http://) listener:
//   "PRI * HTTP/2.0..." (the HTTP/2 preface)   handed to the gRPC server as it is
//                                               (grpc::AddInsecureChannelFromFd), its remote
//                                               address recorded in rpc::ClientPeers
//   an HTTP/1 request line ("GET /metrics ...")  handed to the HTTP server (the gateway, which
//                                               serves /metrics and the probes too)
//   anything else                               closed, counted
//
// An https:// listener reads the ClientHello's ALPN list (tls_client_hello.h) and terminates no
// TLS itself:
//   offers "h2" and not "http/1.1" (gRPC)       relayed, still encrypted, to the gRPC server's own
//                                               TLS listener on loopback (tls_relay.h): gRPC
//                                               does the handshake, as on a port it owned
//   any other ClientHello (curl, Patroni, ...)   handed to the HTTPS server (the gateway, which
//                                               does the handshake with the same certificates)
//   not a ClientHello (plaintext, garbage)       closed, counted
//
// A connection that has not said which within kClassifyTimeout is closed and counted too.
//
// Threading: runs on the io_context it is given (the peer loop); Stop() from any thread.
#pragma once

#include <grpcpp/server.h>

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "epoch/metrics_text.h"
#include "epoch/rpc/client_peers.h"
#include "epoch/status.h"
#include "metrics_http.h"
#include "tls_relay.h"

namespace epoch::server {

// What a connection's first bytes say: the HTTP/2 preface (gRPC), an HTTP/1 request line (an
// upper-case method and a space), neither, or not enough bytes yet to tell.
enum class ClientProtocol { kUnknownYet, kGrpc, kHttp, kNeither };
[[nodiscard]] ClientProtocol ClassifyClientBytes(std::string_view first_bytes);
// The same for an https:// listener, from the ClientHello: gRPC (ALPN offers h2 and not
// http/1.1), HTTP (any other ClientHello, or one still incomplete when the peek was full), not
// TLS, or not enough bytes yet.
[[nodiscard]] ClientProtocol ClassifyTlsBytes(std::string_view first_bytes, bool peek_full);

// Where an https:// client listener's connections go: gRPC's through the relays, the others to
// `http` (which does the TLS handshake).
struct ClientTlsRoute {
  TlsRelays* relays = nullptr;  // outlives the mux
  std::function<void(asio::ip::tcp::socket)> http;
};

class ClientPortMux {
 public:
  static constexpr std::chrono::seconds kClassifyTimeout{10};

  // Serves one HTTP/1 connection from its first byte (over TLS from the ClientHello on).
  using HttpServe = std::function<void(asio::ip::tcp::socket)>;
  using TlsRoute = ClientTlsRoute;

  // `server` (started, without listening ports of its own) and `client_peers` outlive this
  // object. Each connection handed to gRPC has its remote address recorded in `client_peers`.
  ClientPortMux(asio::io_context& io, grpc::Server& server, rpc::ClientPeers& client_peers,
                HttpServe http, TlsRoute tls = {})
      : io_(io),
        grpc_server_(server),
        client_peers_(client_peers),
        http_(std::move(http)),
        tls_(std::move(tls)) {}
  ~ClientPortMux();
  ClientPortMux(const ClientPortMux&) = delete;
  ClientPortMux& operator=(const ClientPortMux&) = delete;

  // Listens on host:port (0: any free port); returns the bound port. `tls`: an https:// listener
  // (needs the TlsRoute).
  [[nodiscard]] Result<std::uint16_t> Listen(const std::string& host, std::uint16_t port,
                                             bool tls = false);
  // Closes the listeners; connections already classified are unaffected.
  void Stop();
  // epoch_client_connections_total{protocol} and the rejected ones.
  void RenderMetrics(MetricsText& m) const;

  struct Counters {
    std::atomic<std::uint64_t> grpc{0};
    std::atomic<std::uint64_t> http{0};
    std::atomic<std::uint64_t> rejected{0};
    // Set by Stop(): connections still being classified are closed, not handed to gRPC.
    std::atomic<bool> stopping{false};
  };

 private:
  struct Listener;
  void Accept(const std::shared_ptr<Listener>& listener);

  asio::io_context& io_;
  grpc::Server& grpc_server_;
  rpc::ClientPeers& client_peers_;
  HttpServe http_;
  TlsRoute tls_;
  std::vector<std::shared_ptr<Listener>> listeners_;  // set up before serving, then fixed
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

}  // namespace epoch::server
