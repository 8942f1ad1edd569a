#include "metrics_http.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <type_traits>

namespace epoch::server {
namespace {

using asio::ip::tcp;

const char* Reason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

// One request on a plain socket or a TLS stream over it.
template <typename Stream>
class Connection : public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  Connection(tcp::socket s, MetricsHttp& http, MetricsHttp::Handler& h) requires(!kTls)
      : stream_(std::move(s)), timer_(stream_.get_executor()), http_(http), handler_(h) {}
  Connection(tcp::socket s, MetricsHttp& http, MetricsHttp::Handler& h,
             std::shared_ptr<asio::ssl::context> tls) requires kTls
      : tls_(std::move(tls)),
        stream_(std::move(s), *tls_),
        timer_(stream_.get_executor()),
        http_(http),
        handler_(h) {}

  void Start() {
    timer_.expires_after(MetricsHttp::kRequestTimeout);
    timer_.async_wait([self = this->shared_from_this()](std::error_code ec) {
      if (ec) return;  // cancelled: the request arrived
      self->http_.dropped.fetch_add(1, std::memory_order_relaxed);
      std::error_code ignored;
      self->Socket().close(ignored);
    });
    if constexpr (kTls) {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](std::error_code ec) {
                                if (ec) return self->Drop(ec);
                                self->Read();
                              });
    } else {
      Read();
    }
  }

 private:
  tcp::socket::lowest_layer_type& Socket() { return stream_.lowest_layer(); }

  // A handshake that failed (no or a refused client certificate, not TLS at all), a request too
  // long, a reset, or the timeout's close.
  void Drop(std::error_code ec) {
    timer_.cancel();
    if (ec != asio::error::operation_aborted) {
      http_.dropped.fetch_add(1, std::memory_order_relaxed);
    }
    std::error_code ignored;
    Socket().close(ignored);
  }

  void Read() {
    asio::async_read_until(stream_, request_, "\r\n\r\n",
                           [self = this->shared_from_this()](std::error_code ec, std::size_t) {
                             if (ec) return self->Drop(ec);
                             self->timer_.cancel();
                             self->Dispatch();
                           });
  }

  void Dispatch() {
    http_.requests.fetch_add(1, std::memory_order_relaxed);
    std::istream in(&request_);
    std::string method, path;
    in >> method >> path;
    if (method != "GET") return Write(HttpReply{405, "method not allowed\n"});
    handler_(path, [self = this->shared_from_this()](HttpReply reply) {
      asio::post(self->stream_.get_executor(),
                 [self, reply = std::move(reply)]() mutable { self->Write(std::move(reply)); });
    });
  }

  void Write(HttpReply reply) {
    response_ = fmt::format(
        "HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.code, Reason(reply.code), reply.content_type, reply.body.size(), reply.body);
    asio::async_write(
        stream_, asio::buffer(response_),
        [self = this->shared_from_this()](std::error_code, std::size_t) { self->Close(); });
  }

  void Close() {
    std::error_code ignored;
    if constexpr (kTls) {
      // close_notify, bounded by a fresh deadline: a peer that never answers it is cut off.
      timer_.expires_after(MetricsHttp::kRequestTimeout);
      timer_.async_wait([self = this->shared_from_this()](std::error_code ec) {
        if (ec) return;
        std::error_code ignore;
        self->Socket().close(ignore);
      });
      stream_.async_shutdown([self = this->shared_from_this()](std::error_code) {
        self->timer_.cancel();
        std::error_code ignore;
        self->Socket().close(ignore);
      });
    } else {
      Socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
  }

  std::shared_ptr<asio::ssl::context> tls_;  // outlives stream_'s SSL object
  Stream stream_;
  asio::steady_timer timer_;
  MetricsHttp& http_;
  MetricsHttp::Handler& handler_;
  asio::streambuf request_{MetricsHttp::kMaxRequestBytes};
  std::string response_;
};

}  // namespace

Result<tcp::endpoint> ListenEndpoint(const std::string& host, std::uint16_t port) {
  std::string bare = host;
  if (bare.size() >= 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  std::error_code ec;
  asio::ip::address address = asio::ip::make_address(bare, ec);
  if (!ec) return tcp::endpoint(address, port);
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(bare, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return Status::IOError(
        fmt::format("cannot listen on {}:{}: {}", host, port, ec ? ec.message() : "no address"));
  }
  return results.begin()->endpoint();
}

Status MetricsHttp::Start(const std::string& host, std::uint16_t port,
                          std::optional<rpc::ServerTlsOptions> tls) {
  if (tls) {
    Result<std::shared_ptr<HttpTlsContexts>> contexts = HttpTlsContexts::Make(*std::move(tls));
    if (!contexts.ok()) return contexts.status().Annotate("--listen-metrics-urls https://");
    tls_ = *std::move(contexts);
  }
  Result<tcp::endpoint> resolved = ListenEndpoint(host, port);
  if (!resolved.ok()) return resolved.status();
  const tcp::endpoint endpoint = *resolved;
  std::error_code ec;
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(64, ec);
  if (ec) {
    return Status::IOError(
        fmt::format("cannot serve metrics on {}:{}: {}", host, port, ec.message()));
  }
  port_ = acceptor_.local_endpoint().port();
  Accept();
  return Status::Ok();
}

void MetricsHttp::Stop() {
  asio::post(acceptor_.get_executor(), [this] {
    std::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  });
}

void MetricsHttp::Serve(tcp::socket socket) {
  if (!tls_) {
    std::make_shared<Connection<tcp::socket>>(std::move(socket), *this, handler_)->Start();
    return;
  }
  if (tls_serve_) return tls_serve_(std::move(socket), tls_->Get());
  std::make_shared<Connection<asio::ssl::stream<tcp::socket>>>(std::move(socket), *this, handler_,
                                                               tls_->Get())
      ->Start();
}

Result<std::shared_ptr<HttpTlsContexts>> HttpTlsContexts::Make(rpc::ServerTlsOptions tls) {
  Result<std::shared_ptr<asio::ssl::context>> context = MakeMetricsTlsContext(tls);
  if (!context.ok()) return context.status();
  return std::shared_ptr<HttpTlsContexts>(new HttpTlsContexts(std::move(tls), *context));
}

std::shared_ptr<asio::ssl::context> HttpTlsContexts::Get() {
  const auto now = std::chrono::steady_clock::now();
  if (now - read_ < tls_.refresh_interval) return last_;
  read_ = now;
  Result<std::shared_ptr<asio::ssl::context>> fresh = MakeMetricsTlsContext(tls_);
  if (fresh.ok()) {
    last_ = *std::move(fresh);
  } else {
    spdlog::warn("HTTPS: keeping the previous certificate: {}", fresh.status().message());
  }
  return last_;
}

Result<std::shared_ptr<asio::ssl::context>> MakeMetricsTlsContext(
    const rpc::ServerTlsOptions& tls) {
  auto context = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  std::error_code ec;
  context->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1,
                       ec);
  // The process's cipher list (rpc::SetProcessTlsPolicy, --cipher-suites).
  if (const char* ciphers = std::getenv("GRPC_SSL_CIPHER_SUITES"); ciphers != nullptr) {
    if (SSL_CTX_set_cipher_list(context->native_handle(), ciphers) != 1) {
      return Status::InvalidArgument(fmt::format("--cipher-suites: OpenSSL refuses {}", ciphers));
    }
  }
  const rpc::TlsFiles& files = tls.files;
  context->use_certificate_chain_file(files.cert_file, ec);
  if (ec) return Status::IOError(fmt::format("--cert-file {}: {}", files.cert_file, ec.message()));
  context->use_private_key_file(files.key_file, asio::ssl::context::pem, ec);
  if (ec) return Status::IOError(fmt::format("--key-file {}: {}", files.key_file, ec.message()));
  if (!files.trusted_ca_file.empty()) {
    context->load_verify_file(files.trusted_ca_file, ec);
    if (ec) {
      return Status::IOError(
          fmt::format("--trusted-ca-file {}: {}", files.trusted_ca_file, ec.message()));
    }
  }
  if (tls.client_cert_auth) {
    context->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  return context;
}

void MetricsHttp::Accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      Serve(std::move(socket));
      return Accept();
    }
    // Out of descriptors or similar: retry later rather than spin on the shared loop.
    retry_.expires_after(std::chrono::milliseconds(100));
    retry_.async_wait([this](std::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) Accept();
    });
  });
}

void MetricsHttp::RenderMetrics(
    MetricsText& m, const std::vector<std::pair<std::string, const MetricsHttp*>>& endpoints) {
  m.Header("epoch_http_requests_total", "counter",
           "HTTP requests answered (/metrics, health probes), by listener.");
  for (const auto& [name, http] : endpoints) {
    m.Sample("epoch_http_requests_total", {{"listener", name}},
             http->requests.load(std::memory_order_relaxed));
  }
  m.Header("epoch_http_requests_dropped_total", "counter",
           "HTTP connections closed without an answer: request too long, malformed or too slow.");
  for (const auto& [name, http] : endpoints) {
    m.Sample("epoch_http_requests_dropped_total", {{"listener", name}},
             http->dropped.load(std::memory_order_relaxed));
  }
}

}  // namespace epoch::server
