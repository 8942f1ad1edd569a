// GatewayHttp: etcd's HTTP/JSON gateway over HTTP/1.1, for connections accepted elsewhere (the
// client port's ClientPortMux). Each POST under /v3/ (and /v3beta/, /v3alpha/) is turned into the
// gRPC request of its route (route_table.h, json_codec.h) and sent to the node's own gRPC server
// over an in-process channel: the same services, interceptors, auth and limits as a gRPC client
// gets. `GET /version` answers etcd's version document. Any other path is handed to the
// fallback (the node's /metrics and health probes), GET only.
//
// Per connection: requests are served one at a time (keep-alive for HTTP/1.1; no pipelining —
// bytes of a next request wait until the answer is written). Unary answers carry
// Content-Length; stream answers (watch, lease keep-alive, snapshot, election observe) are
// chunked, one {"result":...} line per message, and end the connection when the stream ends.
// A call in flight is cancelled when its client goes away.
//
// Bounds: a request head over kMaxHeadBytes gets 431; a body over options.max_body_bytes 413;
// a chunked request body 411 (each then closes); a connection silent for kIdleTimeout with a
// request unfinished or none started is closed. A stream whose client reads slower than the
// stream produces is cut once options.max_buffered_bytes of output wait (counted). At most
// options.max_connections connections are open at once, options.max_connections_per_address from
// one remote address; a connection past either gets 503 with an etcd error body (plaintext) or
// is closed (TLS), and is counted.
//
// Threading: Serve from any thread; each connection runs on a strand of the socket's executor.
// gRPC's callback threads convert responses to JSON and post the bytes there.
#pragma once

#include <grpcpp/grpcpp.h>

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "epoch/metrics_text.h"

namespace epoch::gateway {

struct GatewayOptions {
  // Bodies longer than this get 413. The daemon sets it from --max-request-bytes: base64 takes
  // 4/3 of the bytes, and JSON's names and quotes some more.
  std::size_t max_body_bytes = 2 << 20;
  // Stream output waiting for a slow reader, per connection, before the stream is cut.
  std::size_t max_buffered_bytes = 8 << 20;
  // Connections open at once, in all and from one remote address (--max-gateway-connections,
  // --max-gateway-connections-per-address).
  std::size_t max_connections = 4096;
  std::size_t max_connections_per_address = 256;
  std::string server_version;   // /version's "etcdserver"
  std::string cluster_version;  // /version's "etcdcluster"
};

struct HttpAnswer {
  int code = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

class GatewayHttp {
 public:
  static constexpr std::size_t kMaxHeadBytes = 16 * 1024;
  static constexpr std::chrono::seconds kIdleTimeout{60};

  using Respond = std::function<void(HttpAnswer)>;
  // Serves a GET of a path outside the gateway; answers through Respond once, from any thread.
  using Fallback = std::function<void(const std::string& path, Respond respond)>;

  // `channel` reaches the node's gRPC server (grpc::Server::InProcessChannel, with a receive
  // limit that fits the largest response).
  GatewayHttp(std::shared_ptr<grpc::Channel> channel, GatewayOptions options, Fallback fallback);
  ~GatewayHttp();
  GatewayHttp(const GatewayHttp&) = delete;
  GatewayHttp& operator=(const GatewayHttp&) = delete;

  // Serves the connection until it ends; the socket's executor runs it.
  void Serve(asio::ip::tcp::socket socket);
  // The same over TLS: a server handshake with `tls` first (a failed one is a dropped
  // connection).
  void ServeTls(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls);

  // epoch_gateway_requests_total{path,code}, epoch_gateway_streams,
  // epoch_gateway_streams_cut_total, epoch_gateway_connections_dropped_total,
  // epoch_gateway_connections, epoch_gateway_connections_refused_total{reason}.
  void RenderMetrics(MetricsText& m) const;

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;  // also held by each connection, which may outlive this
};

}  // namespace epoch::gateway
