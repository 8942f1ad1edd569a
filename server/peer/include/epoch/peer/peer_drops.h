// PeerDrops: why frames and connections on the peer port were refused, counted for /metrics as
// `epoch_peer_frames_dropped_total{reason="..."}` and
// `epoch_peer_connections_refused_total{reason="..."}`.
//
// Who counts: the transport (hello, frame size, read deadline, connection caps), PeerFrameGate
// (sender, recipient, membership, decoding, TimeoutNow), PeerForwarder (forged or unknown
// forwards), the snapshot manager (chunks not from the leader, no disk space).
//
// Threading: thread-safe (relaxed atomics).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>

#include "epoch/metrics_text.h"

namespace epoch::server {

enum class FrameDrop : std::uint8_t {
  kUnparsable,           // not a raftpb.Frame, or a frame with no known body
  kNotMember,            // from a node that is not (or no longer) a voter or learner
  kSenderMismatch,       // the message names another sender than the connection's member
  kWrongRecipient,       // the message is addressed to another node
  kMalformed,            // fails decoding (unknown type, implausible term or index, ...)
  kTimeoutNotLeader,     // TimeoutNow not from the leader of the current term
  kForwardForged,        // a forwarded write that speaks for another member
  kForwardUnknown,       // a forward answer nobody on this link is waiting for
  kSnapshotNotLeader,    // a snapshot chunk not from the leader of the current term
  kSnapshotNoSpace,      // a snapshot whose announced size does not fit on the disk
  kFrameTooLarge,        // a length prefix over the frame-size limit (connection closed)
  kPartialFrameTimeout,  // a frame not completed within the read deadline (connection closed)
  kCount
};

inline constexpr std::size_t kFrameDropReasons = static_cast<std::size_t>(FrameDrop::kCount);

enum class ConnectionRefusal : std::uint8_t {
  kBadHello,            // the first frame was not a hello
  kHelloTimeout,        // no hello within the hello timeout
  kWrongCluster,        // a hello from another cluster
  kNotMember,           // a hello from a node that is not a member
  kPerAddressLimit,     // too many connections from one remote address
  kTotalLimit,          // too many inbound connections in total
  kAcceptError,         // accept() failed (EMFILE, ENFILE, ...): accepting paused briefly
  kTlsHandshake,        // the TLS handshake failed (plaintext, untrusted or missing certificate)
  kCertNotAllowed,      // the client certificate fails --peer-cert-allowed-cn / -hostname
  kCertMemberMismatch,  // the certificate does not name the member the hello (or dial) names
  kDialTlsHandshake,    // a dialled peer failed the TLS handshake (untrusted certificate, no TLS)
  kCount
};

inline constexpr std::size_t kConnectionRefusalReasons =
    static_cast<std::size_t>(ConnectionRefusal::kCount);

[[nodiscard]] std::string_view FrameDropName(FrameDrop reason);
[[nodiscard]] std::string_view ConnectionRefusalName(ConnectionRefusal reason);

class PeerDrops {
 public:
  void Count(FrameDrop reason) { frames_[Index(reason)].fetch_add(1, std::memory_order_relaxed); }
  void Count(ConnectionRefusal reason) {
    connections_[Index(reason)].fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t Get(FrameDrop reason) const {
    return frames_[Index(reason)].load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::uint64_t Get(ConnectionRefusal reason) const {
    return connections_[Index(reason)].load(std::memory_order_relaxed);
  }
  // Both families, one line per reason (zeros included, so a scrape sees every reason).
  void RenderMetrics(MetricsText& m) const;

 private:
  template <typename E>
  static constexpr std::size_t Index(E e) {
    return static_cast<std::size_t>(e);
  }
  std::array<std::atomic<std::uint64_t>, kFrameDropReasons> frames_{};
  std::array<std::atomic<std::uint64_t>, kConnectionRefusalReasons> connections_{};
};

}  // namespace epoch::server
