#include "epoch/peer/peer_codec.h"

#include <fmt/format.h>

namespace epoch::server {
namespace {

struct TypePair {
  raft::MessageType core;
  raftpb::MessageType wire;
};

// One table both directions read, so a new type cannot be mapped one way only.
constexpr TypePair kTypes[] = {
    {raft::MessageType::kAppendEntries, raftpb::APPEND_ENTRIES},
    {raft::MessageType::kAppendEntriesResponse, raftpb::APPEND_ENTRIES_RESPONSE},
    {raft::MessageType::kRequestVote, raftpb::REQUEST_VOTE},
    {raft::MessageType::kRequestVoteResponse, raftpb::REQUEST_VOTE_RESPONSE},
    {raft::MessageType::kPreVote, raftpb::REQUEST_PRE_VOTE},
    {raft::MessageType::kPreVoteResponse, raftpb::REQUEST_PRE_VOTE_RESPONSE},
    {raft::MessageType::kHeartbeat, raftpb::HEARTBEAT},
    {raft::MessageType::kHeartbeatResponse, raftpb::HEARTBEAT_RESPONSE},
    {raft::MessageType::kInstallSnapshot, raftpb::INSTALL_SNAPSHOT},
    {raft::MessageType::kTimeoutNow, raftpb::TIMEOUT_NOW},
    {raft::MessageType::kReadIndex, raftpb::READ_INDEX},
    {raft::MessageType::kReadIndexResponse, raftpb::READ_INDEX_RESPONSE},
};

raftpb::MessageType ToWire(raft::MessageType type) {
  for (const TypePair& p : kTypes) {
    if (p.core == type) return p.wire;
  }
  return raftpb::MESSAGE_TYPE_UNSPECIFIED;
}

std::optional<raft::MessageType> FromWire(raftpb::MessageType type) {
  for (const TypePair& p : kTypes) {
    if (p.wire == type) return p.core;
  }
  return std::nullopt;
}

void EncodeConf(const raft::ConfState& conf, raftpb::ConfState* out) {
  for (NodeId id : conf.voters) out->add_voters(id.value());
  for (NodeId id : conf.learners) out->add_learners(id.value());
}

raft::ConfState DecodeConf(const raftpb::ConfState& in) {
  raft::ConfState conf;
  for (std::uint64_t id : in.voters()) conf.voters.emplace_back(id);
  for (std::uint64_t id : in.learners()) conf.learners.emplace_back(id);
  return conf;
}

// A field added to raft::Message changes its size: map it in both functions below, then update
// this number. (The round-trip tests compare every field, but only those they set.)
static_assert(sizeof(raft::Message) == 200, "raft::Message changed: update the peer codec");

// Terms and indexes at or above raft::kMaxPlausibleValue are refused: adopted and persisted, a
// term near 2^64 would wrap and no leader could be elected again.
Status CheckPlausible(std::string_view what, std::uint64_t value) {
  if (value < raft::kMaxPlausibleValue) return Status::Ok();
  return Status::InvalidArgument(fmt::format("implausible {} {} in a peer message", what, value));
}

Status CheckNumbers(const raftpb::Message& in) {
  EPOCH_RETURN_IF_ERROR(CheckPlausible("term", in.term()));
  EPOCH_RETURN_IF_ERROR(CheckPlausible("log term", in.log_term()));
  EPOCH_RETURN_IF_ERROR(CheckPlausible("index", in.index()));
  EPOCH_RETURN_IF_ERROR(CheckPlausible("commit", in.commit()));
  EPOCH_RETURN_IF_ERROR(CheckPlausible("reject hint", in.reject_hint()));
  EPOCH_RETURN_IF_ERROR(CheckPlausible("floor", in.floor()));
  for (const raftpb::Entry& pe : in.entries()) {
    EPOCH_RETURN_IF_ERROR(CheckPlausible("entry term", pe.term()));
    EPOCH_RETURN_IF_ERROR(CheckPlausible("entry index", pe.index()));
  }
  if (in.has_snapshot()) {
    EPOCH_RETURN_IF_ERROR(CheckPlausible("snapshot term", in.snapshot().meta().term()));
    EPOCH_RETURN_IF_ERROR(CheckPlausible("snapshot index", in.snapshot().meta().index()));
  }
  return Status::Ok();
}

}  // namespace

void EncodeMessage(const raft::Message& m, raftpb::Message* out) {
  out->set_type(ToWire(m.type));
  out->set_from(m.from.value());
  out->set_to(m.to.value());
  out->set_term(m.term.value());
  out->set_log_term(m.log_term.value());
  out->set_index(m.index.value());
  out->set_commit(m.commit.value());
  out->set_reject(m.reject);
  out->set_reject_hint(m.reject_hint.value());
  out->set_round(m.round);
  out->set_read_context(m.context);
  out->set_transfer(m.transfer);
  out->set_via_lease(m.via_lease);
  out->set_floor(static_cast<std::uint64_t>(m.floor));
  out->mutable_entries()->Reserve(static_cast<int>(m.entries.size()));
  for (const raft::Entry& e : m.entries) {
    raftpb::Entry* pe = out->add_entries();
    pe->set_term(e.term.value());
    pe->set_index(e.index.value());
    pe->set_type(e.type == raft::EntryType::kConfChange ? raftpb::ENTRY_CONF_CHANGE
                                                        : raftpb::ENTRY_NORMAL);
    pe->set_data(e.data);
  }
  if (m.snapshot) {
    raftpb::SnapshotMeta* meta = out->mutable_snapshot()->mutable_meta();
    meta->set_index(m.snapshot->index.value());
    meta->set_term(m.snapshot->term.value());
    EncodeConf(m.snapshot->conf, meta->mutable_conf());
  }
}

Result<raft::Message> DecodeMessage(const raftpb::Message& in) {
  std::optional<raft::MessageType> type = FromWire(in.type());
  if (!type) {
    return Status::InvalidArgument(
        fmt::format("unknown peer message type {}", static_cast<int>(in.type())));
  }
  EPOCH_RETURN_IF_ERROR(CheckNumbers(in));
  raft::Message m;
  m.type = *type;
  m.from = NodeId(in.from());
  m.to = NodeId(in.to());
  m.term = Term(in.term());
  m.log_term = Term(in.log_term());
  m.index = LogIndex(in.index());
  m.commit = LogIndex(in.commit());
  m.reject = in.reject();
  m.reject_hint = LogIndex(in.reject_hint());
  m.round = in.round();
  m.context = in.read_context();
  m.transfer = in.transfer();
  m.via_lease = in.via_lease();
  m.floor = static_cast<std::int64_t>(in.floor());
  m.entries.reserve(static_cast<std::size_t>(in.entries_size()));
  for (const raftpb::Entry& pe : in.entries()) {
    if (pe.type() != raftpb::ENTRY_NORMAL && pe.type() != raftpb::ENTRY_CONF_CHANGE) {
      return Status::InvalidArgument(
          fmt::format("unknown entry type {}", static_cast<int>(pe.type())));
    }
    m.entries.push_back(raft::Entry{Term(pe.term()), LogIndex(pe.index()),
                                    pe.type() == raftpb::ENTRY_CONF_CHANGE
                                        ? raft::EntryType::kConfChange
                                        : raft::EntryType::kNormal,
                                    pe.data()});
  }
  if (in.has_snapshot()) {
    const raftpb::SnapshotMeta& meta = in.snapshot().meta();
    m.snapshot =
        raft::SnapshotMeta{LogIndex(meta.index()), Term(meta.term()), DecodeConf(meta.conf())};
  }
  if (m.type == raft::MessageType::kInstallSnapshot && !m.snapshot) {
    return Status::InvalidArgument("InstallSnapshot without snapshot metadata");
  }
  return m;
}

std::string EncodeFrame(const raft::Message& message) {
  raftpb::Frame frame;
  EncodeMessage(message, frame.mutable_message());
  return frame.SerializeAsString();
}

Result<raft::Message> DecodeFrame(std::string_view bytes) {
  raftpb::Frame frame;
  if (!frame.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::InvalidArgument("unparsable peer frame");
  }
  if (!frame.has_message()) return Status::InvalidArgument("peer frame carries no message");
  return DecodeMessage(frame.message());
}

}  // namespace epoch::server
