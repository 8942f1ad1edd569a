#include "metrics_http.h"

#include <fmt/format.h>

#include <memory>

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

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket s, MetricsHttp& http, MetricsHttp::Handler& h)
      : socket_(std::move(s)), timer_(socket_.get_executor()), http_(http), handler_(h) {}

  void Start() {
    timer_.expires_after(MetricsHttp::kRequestTimeout);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;  // cancelled: the request arrived
      self->http_.dropped.fetch_add(1, std::memory_order_relaxed);
      std::error_code ignored;
      self->socket_.close(ignored);
    });
    asio::async_read_until(socket_, request_, "\r\n\r\n",
                           [self = shared_from_this()](std::error_code ec, std::size_t) {
                             self->timer_.cancel();
                             if (ec) {
                               // Too long, reset, or closed by the timeout.
                               if (ec != asio::error::operation_aborted) {
                                 self->http_.dropped.fetch_add(1, std::memory_order_relaxed);
                               }
                               return;
                             }
                             self->Dispatch();
                           });
  }

 private:
  void Dispatch() {
    http_.requests.fetch_add(1, std::memory_order_relaxed);
    std::istream in(&request_);
    std::string method, path;
    in >> method >> path;
    if (method != "GET") return Write(HttpReply{405, "method not allowed\n"});
    handler_(path, [self = shared_from_this()](HttpReply reply) {
      asio::post(self->socket_.get_executor(),
                 [self, reply = std::move(reply)]() mutable { self->Write(std::move(reply)); });
    });
  }

  void Write(HttpReply reply) {
    response_ = fmt::format(
        "HTTP/1.0 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
        reply.code, Reason(reply.code), reply.content_type, reply.body.size(), reply.body);
    asio::async_write(socket_, asio::buffer(response_),
                      [self = shared_from_this()](std::error_code, std::size_t) {
                        std::error_code ignored;
                        self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  tcp::socket socket_;
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

Status MetricsHttp::Start(const std::string& host, std::uint16_t port) {
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
  std::make_shared<Connection>(std::move(socket), *this, handler_)->Start();
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
