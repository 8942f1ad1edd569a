// The join handshake on the peer port: how a member started with --initial-cluster-state
// existing and an empty data directory learns the cluster it was added to (etcd's member add).
// With peer TLS it runs inside the TLS handshake like any peer connection: the new member
// presents its peer certificate, which must name the name it joins under (with
// --peer-client-cert-auth), and checks that the answering member's certificate names it.
//
// Wire (docs/formats.md, peer protocol): the new member opens a connection and sends one frame,
// kJoinMagic followed by a serialized raftpb.JoinRequest (its name and peer URLs), instead of a
// hello; the member it dialled answers one frame, a serialized raftpb.JoinResponse, and closes.
// The answer is computed by PeerTransportOptions::answer_join (the daemon: the live member whose
// peer URLs the request names, refused if it has already started).
//
// Threading: AskToJoin blocks the calling thread (the daemon's start, before any loop runs).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "epoch/peer/peer_tls.h"
#include "epoch/status.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

inline constexpr std::string_view kJoinMagic = "EPOCHJ1\n";
// The largest join request or answer frame accepted.
inline constexpr std::size_t kMaxJoinFrameBytes = 64 << 10;

// The payload of a join request frame (without the length prefix).
[[nodiscard]] std::string EncodeJoinRequest(const raftpb::JoinRequest& request);
// Whether a connection's first frame is a join request; fills `request` when it parses.
[[nodiscard]] bool DecodeJoinRequest(std::string_view frame, raftpb::JoinRequest* request);

// With peer TLS: the contexts to use, and the name of the member dialled, which its certificate
// must name (when the contexts verify peers) before the request is sent.
struct JoinTls {
  std::shared_ptr<PeerTls> tls;  // null: plaintext
  std::string peer_name;
};

// Sends `request` to the peer port at host:port and returns its answer, or Unavailable when no
// answer came within `timeout` or the answering member's certificate does not
// name `tls.peer_name`.
[[nodiscard]] Result<raftpb::JoinResponse> AskToJoin(const std::string& host, std::uint16_t port,
                                                     const raftpb::JoinRequest& request,
                                                     std::chrono::milliseconds timeout,
                                                     const JoinTls& tls = {});

}  // namespace epoch::server
