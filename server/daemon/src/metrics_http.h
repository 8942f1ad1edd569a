// MetricsHttp: a minimal HTTP/1.0 endpoint for /metrics (Prometheus text), the health probes
// (/health, /readyz, /livez) and the failpoints (docs/metrics.md). One request per connection;
// only GET; anything else gets 404 or 405. It serves the connections it accepts itself
// (--listen-metrics-urls).
//
// With TLS (an https:// --listen-metrics-urls) every connection is a TLS server handshake first,
// with the client port's certificate, key and CA, and a client certificate required when
// --client-cert-auth is set (as etcd serves its metrics URLs). Given a TlsServe (epochd gives
// the gateway's), each TLS connection is handed to it with the context instead. The contexts
// come from HttpTlsContexts (a rotated certificate is served without a restart). The cipher list
// is the process's
// (rpc::SetProcessTlsPolicy).
//
// Hostile input: a handshake and a request must arrive whole (headers end) within kRequestTimeout
// and fit in kMaxRequestBytes, or the connection is closed without an answer; both are counted
// (epoch_http_requests_dropped_total).
//
// Threading: runs on the io_context it is given. The handler is called there and answers through
// its Respond callback exactly once, from any thread (the reply is written on the io_context).
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "epoch/metrics_text.h"
#include "epoch/rpc/tls.h"
#include "epoch/status.h"

namespace epoch::server {

struct HttpReply {
  int code = 200;
  std::string body;
  std::string content_type = "text/plain; version=0.0.4";
};

// The address to listen on for a listen URL's host: an IP address (IPv6 with or without brackets)
// or a name resolved here ("localhost"; the first address it resolves to). IOError naming the
// address otherwise.
[[nodiscard]] Result<asio::ip::tcp::endpoint> ListenEndpoint(const std::string& host,
                                                             std::uint16_t port);

// The TLS context for each new HTTPS connection (the gateway's and the metrics endpoint's):
// the certificate files are read again when they were last read over a second ago, so a rotated
// certificate is served without a restart; a file that does not load keeps the previous context.
// Threading: one caller at a time (the io_context its connections are accepted on).
class HttpTlsContexts {
 public:
  // Loads the files now; IOError naming the flag of a file that does not load.
  [[nodiscard]] static Result<std::shared_ptr<HttpTlsContexts>> Make(rpc::ServerTlsOptions tls);
  [[nodiscard]] std::shared_ptr<asio::ssl::context> Get();

 private:
  HttpTlsContexts(rpc::ServerTlsOptions tls, std::shared_ptr<asio::ssl::context> context)
      : tls_(std::move(tls)), last_(std::move(context)), read_(std::chrono::steady_clock::now()) {}
  rpc::ServerTlsOptions tls_;
  std::shared_ptr<asio::ssl::context> last_;
  std::chrono::steady_clock::time_point read_;
};

class MetricsHttp {
 public:
  static constexpr std::chrono::seconds kRequestTimeout{10};
  static constexpr std::size_t kMaxRequestBytes = 16 * 1024;

  using Respond = std::function<void(HttpReply)>;
  using Handler = std::function<void(const std::string& path, Respond respond)>;
  // Serves a TLS connection in its place (from the handshake on) with the context given: the
  // gateway, which answers the same paths through the handler and etcd's JSON API besides.
  using TlsServe = std::function<void(asio::ip::tcp::socket, std::shared_ptr<asio::ssl::context>)>;

  MetricsHttp(asio::io_context& io, Handler handler, TlsServe tls_serve = {})
      : acceptor_(io), retry_(io), handler_(std::move(handler)), tls_serve_(std::move(tls_serve)) {}
  // Listens on host:port (0: any free port, see port()); over TLS when `tls` is given (its files
  // must load now).
  [[nodiscard]] Status Start(const std::string& host, std::uint16_t port,
                             std::optional<rpc::ServerTlsOptions> tls = std::nullopt);
  // Serves one request on a connection accepted elsewhere (the client port).
  void Serve(asio::ip::tcp::socket socket);
  void Stop();
  [[nodiscard]] std::uint16_t port() const { return port_; }
  // epoch_http_requests_total{listener} and epoch_http_requests_dropped_total{listener} of the
  // endpoints given, each with its listener label (client, metrics).
  static void RenderMetrics(
      MetricsText& m, const std::vector<std::pair<std::string, const MetricsHttp*>>& endpoints);

  // Counted by the connections.
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> dropped{0};

 private:
  void Accept();

  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_;  // an accept that failed (EMFILE) is retried after a pause
  Handler handler_;
  TlsServe tls_serve_;  // empty: TLS connections are served here
  std::uint16_t port_ = 0;
  std::shared_ptr<HttpTlsContexts> tls_;  // null: plaintext
};

// An OpenSSL server context from the files (the process's cipher list; TLS 1.2 or later).
// IOError naming the flag of a file that does not load.
[[nodiscard]] Result<std::shared_ptr<asio::ssl::context>> MakeMetricsTlsContext(
    const rpc::ServerTlsOptions& tls);

}  // namespace epoch::server
