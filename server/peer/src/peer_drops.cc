#include "epoch/peer/peer_drops.h"

#include <string>
#include <utility>
#include <vector>

namespace epoch::server {

std::string_view FrameDropName(FrameDrop reason) {
  switch (reason) {
    case FrameDrop::kUnparsable: return "unparsable";
    case FrameDrop::kNotMember: return "not_member";
    case FrameDrop::kSenderMismatch: return "sender_mismatch";
    case FrameDrop::kWrongRecipient: return "wrong_recipient";
    case FrameDrop::kMalformed: return "malformed";
    case FrameDrop::kTimeoutNotLeader: return "timeout_now_not_leader";
    case FrameDrop::kForwardForged: return "forward_forged";
    case FrameDrop::kForwardUnknown: return "forward_unknown";
    case FrameDrop::kSnapshotNotLeader: return "snapshot_not_leader";
    case FrameDrop::kSnapshotNoSpace: return "snapshot_no_space";
    case FrameDrop::kFrameTooLarge: return "frame_too_large";
    case FrameDrop::kPartialFrameTimeout: return "partial_frame_timeout";
    case FrameDrop::kCount: break;
  }
  return "unknown";
}

std::string_view ConnectionRefusalName(ConnectionRefusal reason) {
  switch (reason) {
    case ConnectionRefusal::kBadHello: return "bad_hello";
    case ConnectionRefusal::kHelloTimeout: return "hello_timeout";
    case ConnectionRefusal::kWrongCluster: return "wrong_cluster";
    case ConnectionRefusal::kNotMember: return "not_member";
    case ConnectionRefusal::kPerAddressLimit: return "per_address_limit";
    case ConnectionRefusal::kTotalLimit: return "total_limit";
    case ConnectionRefusal::kAcceptError: return "accept_error";
    case ConnectionRefusal::kTlsHandshake: return "tls_handshake";
    case ConnectionRefusal::kCertNotAllowed: return "cert_not_allowed";
    case ConnectionRefusal::kCertMemberMismatch: return "cert_member_mismatch";
    case ConnectionRefusal::kDialTlsHandshake: return "dial_tls_handshake";
    case ConnectionRefusal::kCount: break;
  }
  return "unknown";
}

void PeerDrops::RenderMetrics(MetricsText& m) const {
  std::vector<std::pair<std::string, std::uint64_t>> frames;
  for (std::size_t i = 0; i < kFrameDropReasons; ++i) {
    frames.emplace_back(FrameDropName(static_cast<FrameDrop>(i)), frames_[i].load());
  }
  m.LabeledCounter("epoch_peer_frames_dropped_total",
                   "Peer frames dropped (and peer connections closed for a frame), by reason.",
                   "reason", frames);
  std::vector<std::pair<std::string, std::uint64_t>> connections;
  for (std::size_t i = 0; i < kConnectionRefusalReasons; ++i) {
    connections.emplace_back(ConnectionRefusalName(static_cast<ConnectionRefusal>(i)),
                             connections_[i].load());
  }
  m.LabeledCounter("epoch_peer_connections_refused_total",
                   "Peer connections refused: inbound ones closed before their hello, dialled "
                   "ones whose TLS handshake or certificate failed, by reason.",
                   "reason", connections);
}

}  // namespace epoch::server
