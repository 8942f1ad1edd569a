// Peer codec: raft::Message (the core's plain C++ type) to and from epoch.raftpb.Message (the
// wire). The only place the two meet, so the core never sees protobuf (docs/architecture.md §4).
//
// Decoding never trusts the wire: an unknown type, a term or index >= raft::kMaxPlausibleValue
// (2^62), a missing snapshot meta on InstallSnapshot or an unparsable frame gives
// InvalidArgument, and the caller drops the message (Raft tolerates loss). Threading: pure
// functions.
#pragma once

#include <string>
#include <string_view>

#include "epoch/raft/message.h"
#include "epoch/status.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

void EncodeMessage(const raft::Message& message, raftpb::Message* out);
[[nodiscard]] Result<raft::Message> DecodeMessage(const raftpb::Message& in);

// A whole peer frame payload: a serialized raftpb.Frame holding one message.
[[nodiscard]] std::string EncodeFrame(const raft::Message& message);
[[nodiscard]] Result<raft::Message> DecodeFrame(std::string_view frame);

}  // namespace epoch::server
