#include "client_port_mux.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grpcpp/server_posix.h>

#include <array>
#include <string_view>

#include "tls_client_hello.h"

namespace epoch::server {
namespace {

using asio::ip::tcp;

constexpr std::string_view kHttp2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// The longest HTTP/1 method a probe sends ("OPTIONS") plus its space.
constexpr std::size_t kMaxMethodBytes = 8;
// A connection whose first bytes arrive in pieces is peeked again after this pause.
constexpr std::chrono::milliseconds kPeekAgain{5};

// One accepted connection until it is classified.
class Pending : public std::enable_shared_from_this<Pending> {
 public:
  // `tls`: null on a plaintext listener.
  Pending(tcp::socket socket, grpc::Server& server, rpc::ClientPeers& client_peers,
          const ClientPortMux::HttpServe& http, const ClientPortMux::TlsRoute* tls,
          std::shared_ptr<ClientPortMux::Counters> counters)
      : socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        grpc_server_(server),
        client_peers_(client_peers),
        http_(http),
        tls_(tls),
        counters_(std::move(counters)),
        deadline_(std::chrono::steady_clock::now() + ClientPortMux::kClassifyTimeout) {}

  void Start() {
    timer_.expires_at(deadline_);
    timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->done_) return;
      self->Reject();
    });
    WaitReadable();
  }

 private:
  void WaitReadable() {
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this()](std::error_code ec) { self->Peek(ec); });
  }

  void Peek(std::error_code ec) {
    if (done_) return;
    if (ec) return Close();
    std::array<char, kMaxClientHelloBytes> buf;
    const std::size_t want = tls_ != nullptr ? buf.size() : kHttp2Preface.size();
    const std::size_t n =
        socket_.receive(asio::buffer(buf.data(), want), tcp::socket::message_peek, ec);
    if (ec || n == 0) return Close();  // reset, or closed before saying anything
    const std::string_view bytes(buf.data(), n);
    switch (tls_ != nullptr ? ClassifyTlsBytes(bytes, n == want) : ClassifyClientBytes(bytes)) {
      case ClientProtocol::kGrpc: return tls_ != nullptr ? RelayToGrpc() : HandToGrpc();
      case ClientProtocol::kHttp: return HandToHttp();
      case ClientProtocol::kNeither: return Reject();
      case ClientProtocol::kUnknownYet: break;
    }
    // More bytes are on their way; the ones peeked stay readable, so wait a little first.
    auto again = std::make_shared<asio::steady_timer>(socket_.get_executor(), kPeekAgain);
    again->async_wait([self = shared_from_this(), again](std::error_code) {
      if (!self->done_) self->WaitReadable();
    });
  }

  void HandToGrpc() {
    if (counters_->stopping.load()) return Close();  // the gRPC server is shutting down
    Finish();
    counters_->grpc.fetch_add(1, std::memory_order_relaxed);
    std::error_code ec;
    socket_.set_option(tcp::no_delay(true), ec);  // as gRPC sets on sockets it accepts
    const tcp::endpoint remote = socket_.remote_endpoint(ec);
    if (ec) return Close();
    const int fd = socket_.release(ec);
    if (ec) return;
    // gRPC calls this connection "fd:<fd>": the services find its address here (client_peers.h).
    client_peers_.RecordFd(fd, GrpcPeerName(remote));
    // gRPC drives the descriptor with its own poller, non-blocking.
    const int flags = fcntl(fd, F_GETFL, 0);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    grpc::AddInsecureChannelFromFd(&grpc_server_, fd);  // takes ownership of fd
  }

  void RelayToGrpc() {
    if (counters_->stopping.load()) return Close();
    Finish();
    counters_->grpc.fetch_add(1, std::memory_order_relaxed);
    tls_->relays->Start(std::move(socket_));
  }

  void HandToHttp() {
    Finish();
    counters_->http.fetch_add(1, std::memory_order_relaxed);
    (tls_ != nullptr ? tls_->http : http_)(std::move(socket_));
  }

  void Reject() {
    counters_->rejected.fetch_add(1, std::memory_order_relaxed);
    Close();
  }

  void Close() {
    Finish();
    std::error_code ignored;
    socket_.close(ignored);
  }

  void Finish() {
    done_ = true;
    timer_.cancel();
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  grpc::Server& grpc_server_;
  rpc::ClientPeers& client_peers_;
  ClientPortMux::HttpServe http_;
  const ClientPortMux::TlsRoute* tls_;
  std::shared_ptr<ClientPortMux::Counters> counters_;
  const std::chrono::steady_clock::time_point deadline_;
  bool done_ = false;  // on the io_context only
};

}  // namespace

ClientProtocol ClassifyClientBytes(std::string_view bytes) {
  const std::size_t n = std::min(bytes.size(), kHttp2Preface.size());
  if (bytes.substr(0, n) == kHttp2Preface.substr(0, n)) {
    // "PRI" is no HTTP/1 method a client sends: three bytes decide.
    return n >= 3 ? ClientProtocol::kGrpc : ClientProtocol::kUnknownYet;
  }
  for (std::size_t i = 0; i < bytes.size() && i < kMaxMethodBytes; ++i) {
    const char c = bytes[i];
    if (c == ' ') return i > 0 ? ClientProtocol::kHttp : ClientProtocol::kNeither;
    if (c < 'A' || c > 'Z') return ClientProtocol::kNeither;
  }
  return bytes.size() < kMaxMethodBytes ? ClientProtocol::kUnknownYet : ClientProtocol::kNeither;
}

ClientProtocol ClassifyTlsBytes(std::string_view bytes, bool peek_full) {
  const ClientHelloInfo hello = ParseClientHello(bytes);
  switch (hello.verdict) {
    case ClientHelloInfo::Verdict::kHello:
      return WantsGrpc(hello) ? ClientProtocol::kGrpc : ClientProtocol::kHttp;
    case ClientHelloInfo::Verdict::kNotTls: return ClientProtocol::kNeither;
    case ClientHelloInfo::Verdict::kIncomplete: break;
  }
  // A ClientHello larger than any client sends: the HTTPS side's handshake takes whatever it is.
  return peek_full ? ClientProtocol::kHttp : ClientProtocol::kUnknownYet;
}

struct ClientPortMux::Listener {
  Listener(asio::io_context& io, bool tls_listener) : acceptor(io), retry(io), tls(tls_listener) {}
  tcp::acceptor acceptor;
  asio::steady_timer retry;  // an accept that failed (EMFILE) is retried after a pause
  const bool tls;
};

ClientPortMux::~ClientPortMux() {
  for (auto& l : listeners_) {
    std::error_code ignored;
    l->acceptor.close(ignored);
  }
}

Result<std::uint16_t> ClientPortMux::Listen(const std::string& host, std::uint16_t port, bool tls) {
  if (tls && (tls_.relays == nullptr || !tls_.http)) {
    return Status::InvalidArgument("an https:// client listener needs the TLS route");
  }
  auto listener = std::make_shared<Listener>(io_, tls);
  Result<tcp::endpoint> resolved = ListenEndpoint(host, port);
  if (!resolved.ok()) return resolved.status();
  const tcp::endpoint endpoint = *resolved;
  std::error_code ec;
  listener->acceptor.open(endpoint.protocol(), ec);
  if (!ec) listener->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) listener->acceptor.bind(endpoint, ec);
  if (!ec) listener->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError(
        fmt::format("cannot serve clients on {}:{}: {}", host, port, ec.message()));
  }
  const std::uint16_t bound = listener->acceptor.local_endpoint().port();
  listeners_.push_back(listener);
  Accept(listener);
  return bound;
}

void ClientPortMux::Stop() {
  counters_->stopping.store(true);
  for (auto& l : listeners_) {
    asio::post(io_, [l] {
      std::error_code ignored;
      l->acceptor.close(ignored);
      l->retry.cancel();
    });
  }
}

void ClientPortMux::Accept(const std::shared_ptr<Listener>& listener) {
  listener->acceptor.async_accept([this, listener](std::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !listener->acceptor.is_open()) return;
    if (!ec) {
      std::make_shared<Pending>(std::move(socket), grpc_server_, client_peers_, http_,
                                listener->tls ? &tls_ : nullptr, counters_)
          ->Start();
      return Accept(listener);
    }
    listener->retry.expires_after(std::chrono::milliseconds(100));
    listener->retry.async_wait([this, listener](std::error_code wait_ec) {
      if (!wait_ec && listener->acceptor.is_open()) Accept(listener);
    });
  });
}

void ClientPortMux::RenderMetrics(MetricsText& m) const {
  m.Header("epoch_client_connections_total", "counter",
           "Connections accepted on the client port, by the protocol their first bytes spoke.");
  m.Sample("epoch_client_connections_total", {{"protocol", "grpc"}},
           counters_->grpc.load(std::memory_order_relaxed));
  m.Sample("epoch_client_connections_total", {{"protocol", "http"}},
           counters_->http.load(std::memory_order_relaxed));
  m.Counter("epoch_client_connections_rejected_total",
            "Client-port connections closed unclassified: neither HTTP/2 nor HTTP/1 (on an "
            "https:// port: no TLS ClientHello), or silent for 10 s.",
            counters_->rejected.load(std::memory_order_relaxed));
}

}  // namespace epoch::server
