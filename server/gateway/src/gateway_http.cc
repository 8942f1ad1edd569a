#include "epoch/gateway/gateway_http.h"

#include "gateway_shared.h"
#include "http_connection.h"

namespace epoch::gateway {

GatewayHttp::GatewayHttp(std::shared_ptr<grpc::Channel> channel, GatewayOptions options,
                         Fallback fallback)
    : shared_(
          std::make_shared<Shared>(std::move(channel), std::move(options), std::move(fallback))) {}

GatewayHttp::~GatewayHttp() = default;

void GatewayHttp::Serve(asio::ip::tcp::socket socket) {
  std::make_shared<HttpConnection<asio::ip::tcp::socket>>(std::move(socket), shared_)->Start();
}

void GatewayHttp::ServeTls(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> tls) {
  std::make_shared<HttpConnection<asio::ssl::stream<asio::ip::tcp::socket>>>(
      std::move(socket), shared_, std::move(tls))
      ->Start();
}

void GatewayHttp::RenderMetrics(MetricsText& m) const { shared_->metrics.Render(m); }

}  // namespace epoch::gateway
