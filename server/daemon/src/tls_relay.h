// TlsRelay: carries an https:// client-port connection that ClientPortMux routed to gRPC, byte
// for byte and still encrypted, to the gRPC server's TLS listener on loopback. gRPC does the
// handshake, so client certificates, their CN as the auth user, rotation and the handshake
// counters are gRPC's as on a port it owned; the relay only copies. Each relayed socket is
// recorded with its client's address (rpc::RecordRelayedPeer) before a byte is relayed, so
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

#include "epoch/metrics_text.h"

namespace epoch::server {

class TlsRelays {
 public:
  static constexpr std::chrono::seconds kHalfClosedLinger{10};

  // `upstream`: gRPC's TLS listener. `io`: where the relays run.
  TlsRelays(asio::io_context& io, asio::ip::tcp::endpoint upstream)
      : io_(io), shared_(std::make_shared<Shared>(upstream)) {}

  // Relays `client` (a socket of any io_context; it moves to this one). Any thread.
  void Start(asio::ip::tcp::socket client);
  // epoch_client_tls_relays{,_total,_failed_total}.
  void RenderMetrics(MetricsText& m) const;

  struct Shared {
    explicit Shared(asio::ip::tcp::endpoint up) : upstream(up) {}
    const asio::ip::tcp::endpoint upstream;
    std::atomic<std::int64_t> open{0};
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint64_t> failed{0};  // gRPC's listener could not be reached
  };

 private:
  asio::io_context& io_;
  std::shared_ptr<Shared> shared_;
};

}  // namespace epoch::server
