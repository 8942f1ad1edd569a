// The join handshake on the peer port: how a member started with --initial-cluster-state
// existing and an empty data directory learns the cluster it was added to (etcd's member add).
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
#include <string>
#include <string_view>

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

// Sends `request` to the peer port at host:port (plaintext) and returns its answer, or
// Unavailable when no answer came within `timeout`.
[[nodiscard]] Result<raftpb::JoinResponse> AskToJoin(const std::string& host, std::uint16_t port,
                                                     const raftpb::JoinRequest& request,
                                                     std::chrono::milliseconds timeout);

}  // namespace epoch::server
