#include "epoch/gateway/gateway_http.h"

#include "epoch/gateway/http_request.h"
#include "epoch/gateway/json_codec.h"
#include "gateway_shared.h"
#include "http_connection.h"

namespace epoch::gateway {
namespace {

using asio::ip::tcp;

// A slot for `socket`'s remote address, or null (counted by StreamSlots) past the caps.
std::unique_ptr<StreamSlots::Slot> Admit(GatewayHttp::Shared& shared, const tcp::socket& socket,
                                         StreamSlots::Refusal* why) {
  std::error_code ec;
  const tcp::endpoint remote = socket.remote_endpoint(ec);
  return shared.connections.AcquireFor(ec ? std::string() : remote.address().to_string(), why);
}

// etcd's error body with 503, written once and the connection closed: the client learns why
// without the gateway reading its request.
void RefuseWith503(tcp::socket socket, StreamSlots::Refusal why) {
  const std::string message =
      why == StreamSlots::Refusal::kTotal
          ? "epoch: too many gateway connections on this member (--max-gateway-connections)"
          : "epoch: too many gateway connections from this address "
            "(--max-gateway-connections-per-address)";
  const std::string body = ErrorBody(grpc::StatusCode::UNAVAILABLE, message);
  auto answer = std::make_shared<std::string>(
      HttpResponse(1, 503, "application/json", "Connection: close\r\n", body));
  auto sock = std::make_shared<tcp::socket>(std::move(socket));
  asio::async_write(*sock, asio::buffer(*answer), [sock, answer](std::error_code, std::size_t) {
    std::error_code ignored;
    sock->shutdown(tcp::socket::shutdown_both, ignored);
    sock->close(ignored);
  });
}

}  // namespace

GatewayHttp::GatewayHttp(std::shared_ptr<grpc::Channel> channel, GatewayOptions options,
                         Fallback fallback)
    : shared_(
          std::make_shared<Shared>(std::move(channel), std::move(options), std::move(fallback))) {}

GatewayHttp::~GatewayHttp() = default;

void GatewayHttp::Serve(tcp::socket socket) {
  StreamSlots::Refusal why = StreamSlots::Refusal::kNone;
  std::unique_ptr<StreamSlots::Slot> slot = Admit(*shared_, socket, &why);
  if (!slot) return RefuseWith503(std::move(socket), why);
  std::make_shared<HttpConnection<tcp::socket>>(std::move(socket), shared_, std::move(slot))
      ->Start();
}

void GatewayHttp::ServeTls(tcp::socket socket, std::shared_ptr<asio::ssl::context> tls) {
  StreamSlots::Refusal why = StreamSlots::Refusal::kNone;
  std::unique_ptr<StreamSlots::Slot> slot = Admit(*shared_, socket, &why);
  if (!slot) {
    // No answer without a handshake; a refused TLS connection is only closed (and counted).
    std::error_code ignored;
    socket.close(ignored);
    return;
  }
  std::make_shared<HttpConnection<asio::ssl::stream<tcp::socket>>>(std::move(socket), shared_,
                                                                   std::move(slot), std::move(tls))
      ->Start();
}

void GatewayHttp::RenderMetrics(MetricsText& m) const {
  shared_->metrics.Render(m);
  shared_->connections.RenderMetrics(m, "epoch_gateway_connections", "HTTP gateway connections");
}

}  // namespace epoch::gateway
