#include "metrics_http.h"

#include <fmt/format.h>

#include <memory>

namespace epoch::server {
namespace {

using asio::ip::tcp;

struct Connection : std::enable_shared_from_this<Connection> {
  Connection(tcp::socket s, MetricsHttp::Handler& h) : socket(std::move(s)), handler(h) {}

  void Start() {
    asio::async_read_until(socket, request, "\r\n\r\n",
                           [self = shared_from_this()](std::error_code ec, std::size_t) {
                             if (!ec) self->Respond();
                           });
  }

  void Respond() {
    std::istream in(&request);
    std::string method, path;
    in >> method >> path;
    HttpReply reply = method == "GET" ? handler(path) : HttpReply{405, "method not allowed\n"};
    const char* reason = reply.code == 200   ? "OK"
                         : reply.code == 503 ? "Service Unavailable"
                         : reply.code == 404 ? "Not Found"
                                             : "Error";
    response = fmt::format(
        "HTTP/1.0 {} {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n"
        "Connection: close\r\n\r\n{}",
        reply.code, reason, reply.body.size(), reply.body);
    asio::async_write(socket, asio::buffer(response),
                      [self = shared_from_this()](std::error_code, std::size_t) {
                        std::error_code ignored;
                        self->socket.shutdown(tcp::socket::shutdown_both, ignored);
                      });
  }

  tcp::socket socket;
  MetricsHttp::Handler& handler;
  asio::streambuf request{16 * 1024};
  std::string response;
};

}  // namespace

Status MetricsHttp::Start(const std::string& host, std::uint16_t port) {
  std::error_code ec;
  tcp::endpoint endpoint(asio::ip::make_address(host, ec), port);
  if (!ec) acceptor_.open(endpoint.protocol(), ec);
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
  });
}

void MetricsHttp::Accept() {
  acceptor_.async_accept([this](std::error_code ec, tcp::socket socket) {
    if (ec) return;
    std::make_shared<Connection>(std::move(socket), handler_)->Start();
    Accept();
  });
}

}  // namespace epoch::server
