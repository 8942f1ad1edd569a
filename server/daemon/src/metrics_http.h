// MetricsHttp: a minimal HTTP/1.0 endpoint for /metrics (Prometheus text), /health and /ready
// (docs/architecture.md §8). One request per connection; anything else gets 404. It exists so
// operators and load balancers can probe a node without a gRPC client.
//
// Threading: runs on the io_context it is given; the content providers are called there and must
// be thread-safe.
#pragma once

#include <asio.hpp>
#include <functional>
#include <string>

#include "epoch/status.h"

namespace epoch::server {

struct HttpReply {
  int code = 200;
  std::string body;
};

class MetricsHttp {
 public:
  using Handler = std::function<HttpReply(const std::string& path)>;

  MetricsHttp(asio::io_context& io, Handler handler)
      : acceptor_(io), handler_(std::move(handler)) {}
  [[nodiscard]] Status Start(const std::string& host, std::uint16_t port);
  void Stop();
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  void Accept();

  asio::ip::tcp::acceptor acceptor_;
  Handler handler_;
  std::uint16_t port_ = 0;
};

}  // namespace epoch::server
