#include "tls_relay.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>

namespace epoch::server {
namespace {

using asio::ip::tcp;

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(tcp::socket client, std::shared_ptr<TlsRelays::Shared> shared)
      : client_(std::move(client)),
        upstream_(client_.get_executor()),
        linger_(client_.get_executor()),
        shared_(std::move(shared)) {}
  // A relay still open when its loop is destroyed (shutdown) closes its sockets; the node's
  // ClientPeers may be gone by then, so it is not told.
  ~Relay() {
    if (closed_) return;
    std::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
  }
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  void Start() {
    shared_->open.fetch_add(1, std::memory_order_relaxed);
    shared_->started.fetch_add(1, std::memory_order_relaxed);
    upstream_.async_connect(shared_->upstream, [self = shared_from_this()](std::error_code ec) {
      if (ec) {
        self->shared_->failed.fetch_add(1, std::memory_order_relaxed);
        return self->Close();
      }
      self->Connected();
    });
  }

 private:
  // One direction: its buffer and whether its reader has ended.
  struct Half {
    std::array<char, 16 * 1024> buf;
    bool ended = false;
  };

  void Connected() {
    std::error_code ec;
    upstream_.set_option(tcp::no_delay(true), ec);
    const tcp::endpoint relay_end = upstream_.local_endpoint(ec);
    const tcp::endpoint client_end = client_.remote_endpoint(ec);
    if (ec) return Close();
    relay_peer_ = GrpcPeerName(relay_end);
    shared_->peers.Record(relay_peer_, GrpcPeerName(client_end));
    Pump(client_, upstream_, up_);
    Pump(upstream_, client_, down_);
  }

  void Pump(tcp::socket& from, tcp::socket& to, Half& half) {
    from.async_read_some(asio::buffer(half.buf), [self = shared_from_this(), &from, &to, &half](
                                                     std::error_code ec, std::size_t n) {
      if (self->closed_) return;
      if (ec == asio::error::eof) return self->Ended(to, half);
      if (ec) return self->Close();
      asio::async_write(to, asio::buffer(half.buf.data(), n),
                        [self, &from, &to, &half](std::error_code wec, std::size_t) {
                          if (self->closed_) return;
                          if (wec) return self->Close();
                          self->Pump(from, to, half);
                        });
    });
  }

  // `half`'s reader saw the end: the other side hears it; both ended, the relay is done. A side
  // that never ends its half after that is not waited for past kHalfClosedLinger.
  void Ended(tcp::socket& to, Half& half) {
    half.ended = true;
    std::error_code ignored;
    to.shutdown(tcp::socket::shutdown_send, ignored);
    if (up_.ended && down_.ended) return Close();
    linger_.expires_after(TlsRelays::kHalfClosedLinger);
    linger_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (!ec) self->Close();
    });
  }

  void Close() {
    if (closed_) return;
    closed_ = true;
    std::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    linger_.cancel();
    if (!relay_peer_.empty()) shared_->peers.Forget(relay_peer_);
    shared_->open.fetch_sub(1, std::memory_order_relaxed);
  }

  tcp::socket client_;
  tcp::socket upstream_;
  asio::steady_timer linger_;
  std::shared_ptr<TlsRelays::Shared> shared_;
  std::string relay_peer_;
  Half up_;    // client → gRPC
  Half down_;  // gRPC → client
  bool closed_ = false;
};

}  // namespace

std::string GrpcPeerName(const tcp::endpoint& remote) {
  const asio::ip::address a = remote.address();
  if (a.is_v6()) return fmt::format("ipv6:[{}]:{}", a.to_string(), remote.port());
  return fmt::format("ipv4:{}:{}", a.to_string(), remote.port());
}

void TlsRelays::Start(tcp::socket client) {
  std::error_code ec;
  const auto protocol = client.local_endpoint(ec).protocol();
  const int fd = client.release(ec);
  if (ec) return;
  asio::post(io_, [&io = io_, fd, protocol, shared = shared_] {
    std::error_code assign_ec;
    tcp::socket moved(io);
    moved.assign(protocol, fd, assign_ec);
    if (assign_ec) {
      ::close(fd);
      return;
    }
    moved.set_option(tcp::no_delay(true), assign_ec);
    std::make_shared<Relay>(std::move(moved), shared)->Start();
  });
}

void TlsRelays::RenderMetrics(MetricsText& m) const {
  m.Gauge("epoch_client_tls_relays",
          "https:// client-port connections relayed to gRPC's TLS listener now.",
          shared_->open.load(std::memory_order_relaxed));
  m.Counter("epoch_client_tls_relays_total",
            "https:// client-port connections routed to gRPC (their ClientHello offered h2 and "
            "not http/1.1).",
            shared_->started.load(std::memory_order_relaxed));
  m.Counter("epoch_client_tls_relays_failed_total",
            "Relayed connections closed because gRPC's loopback TLS listener could not be reached.",
            shared_->failed.load(std::memory_order_relaxed));
}

}  // namespace epoch::server
