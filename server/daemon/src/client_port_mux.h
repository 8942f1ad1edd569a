// ClientPortMux: gRPC and HTTP/1 on one client port, as etcd serves /metrics and /health next to
// its gRPC API (etcd multiplexes with cmux). It accepts the client port's connections itself and
// peeks at their first bytes without consuming them:
//
//   "PRI * HTTP/2.0..." (the HTTP/2 preface)   handed to the gRPC server as it is
//                                               (grpc::AddInsecureChannelFromFd), its remote
//                                               address recorded in rpc::FdPeers
//   an HTTP/1 request line ("GET /metrics ...")  handed to the HTTP server (the gateway, which
//                                               serves /metrics and the probes too)
//   anything else                               closed, counted
//
// A connection that has not said which within kClassifyTimeout is closed and counted too.
// Plaintext only: with client TLS the gRPC server listens on the port itself, and /metrics, the
// probes and the gateway are served on --listen-metrics-urls (docs/metrics.md).
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
#include "epoch/rpc/fd_peers.h"
#include "epoch/status.h"
#include "metrics_http.h"

namespace epoch::server {

// What a connection's first bytes say: the HTTP/2 preface (gRPC), an HTTP/1 request line (an
// upper-case method and a space), neither, or not enough bytes yet to tell.
enum class ClientProtocol { kUnknownYet, kGrpc, kHttp, kNeither };
[[nodiscard]] ClientProtocol ClassifyClientBytes(std::string_view first_bytes);

class ClientPortMux {
 public:
  static constexpr std::chrono::seconds kClassifyTimeout{10};

  // Serves one HTTP/1 connection from its first byte.
  using HttpServe = std::function<void(asio::ip::tcp::socket)>;

  // `server` (started, without listening ports of its own) and `fd_peers` outlive this object.
  // Each connection handed to gRPC has its remote address recorded in `fd_peers`.
  ClientPortMux(asio::io_context& io, grpc::Server& server, rpc::FdPeers& fd_peers, HttpServe http)
      : io_(io), grpc_server_(server), fd_peers_(fd_peers), http_(std::move(http)) {}
  ~ClientPortMux();
  ClientPortMux(const ClientPortMux&) = delete;
  ClientPortMux& operator=(const ClientPortMux&) = delete;

  // Listens on host:port (0: any free port); returns the bound port.
  [[nodiscard]] Result<std::uint16_t> Listen(const std::string& host, std::uint16_t port);
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
  rpc::FdPeers& fd_peers_;
  HttpServe http_;
  std::vector<std::shared_ptr<Listener>> listeners_;  // set up before serving, then fixed
  std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
};

}  // namespace epoch::server
