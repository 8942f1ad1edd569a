// TlsRelay: carries an https:// client-port connection that ClientPortMux routed to gRPC, byte
// for byte and still encrypted, to the gRPC server's TLS listener on loopback. gRPC does the
// handshake, so client certificates, their CN as the auth user, rotation and the handshake
// counters are gRPC's as on a port it owned; the relay only copies. Each relayed socket is
// recorded with its client's address (rpc::ClientPeers) before a byte is relayed, so
// per-address limits and logs see the client, not loopback.
//
// Back-pressure: each direction has one 16 KiB buffer and reads again only when the last read
// was written, so a client or a gRPC side that stops reading stops the other side's reads (no
// queue grows). A half-close is passed on, and the other side gets kHalfClosedLinger to end its
// half too; an error on either side closes both.
//
// Threading: every relay runs on the io_context given to Start (epochd's client-TLS loop), one
// thread, so a relay's handlers never run concurrently.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "epoch/metrics_text.h"
#include "epoch/rpc/client_peers.h"

namespace epoch::server {

// An address as gRPC's peer() names a connection it accepted itself: "ipv4:10.0.0.7:51234",
// "ipv6:[::1]:51234".
[[nodiscard]] std::string GrpcPeerName(const asio::ip::tcp::endpoint& remote);

class TlsRelays {
 public:
  static constexpr std::chrono::seconds kHalfClosedLinger{10};

  // `upstream`: gRPC's TLS listener. `io`: where the relays run.
  // `peers` outlives every relay (their loop stops first).
  TlsRelays(asio::io_context& io, asio::ip::tcp::endpoint upstream, rpc::ClientPeers& peers)
      : io_(io), shared_(std::make_shared<Shared>(upstream, peers)) {}

  // Relays `client` (a socket of any io_context; it moves to this one). Any thread.
  void Start(asio::ip::tcp::socket client);
  // epoch_client_tls_relays{,_total,_failed_total}.
  void RenderMetrics(MetricsText& m) const;

  struct Shared {
    Shared(asio::ip::tcp::endpoint up, rpc::ClientPeers& client_peers)
        : upstream(up), peers(client_peers) {}
    const asio::ip::tcp::endpoint upstream;
    rpc::ClientPeers& peers;
    std::atomic<std::int64_t> open{0};
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint64_t> failed{0};  // gRPC's listener could not be reached
  };

 private:
  asio::io_context& io_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace epoch::server
