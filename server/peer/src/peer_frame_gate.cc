#include "epoch/peer/peer_frame_gate.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "epoch/peer/peer_codec.h"

namespace epoch::server {
namespace {

bool IsSnapshotTraffic(const raftpb::Message& message) {
  return message.type() == raftpb::INSTALL_SNAPSHOT ||
         message.type() == raftpb::INSTALL_SNAPSHOT_RESPONSE;
}

}  // namespace

PeerFrameGate::PeerFrameGate(NodeId self, std::vector<NodeId> members, PeerDrops& drops,
                             Routes routes)
    : self_(self),
      drops_(drops),
      routes_(std::move(routes)),
      members_(members.begin(), members.end()) {}

void PeerFrameGate::SetMembers(const raft::ConfState& conf) {
  std::set<NodeId> members(conf.voters.begin(), conf.voters.end());
  members.insert(conf.learners.begin(), conf.learners.end());
  std::lock_guard lock(mu_);
  for (NodeId old : members_) {
    if (members.contains(old)) continue;
    departed_.push_back(old);
    if (departed_.size() > kMaxDeparted) departed_.pop_front();
  }
  std::erase_if(departed_, [&](NodeId id) { return members.contains(id); });
  members_ = std::move(members);
}

bool PeerFrameGate::IsMember(NodeId id) const {
  if (id == self_ || id == raft::kNoNode) return false;
  std::lock_guard lock(mu_);
  return members_.contains(id);
}

bool PeerFrameGate::IsDeparted(NodeId id) const {
  std::lock_guard lock(mu_);
  return std::find(departed_.begin(), departed_.end(), id) != departed_.end();
}

void PeerFrameGate::Handle(NodeId from, std::string_view frame) {
  raftpb::Frame parsed;
  if (!parsed.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return Drop(FrameDrop::kUnparsable, from, "does not parse");
  }
  const bool departed = !IsMember(from);
  if (departed && !IsDeparted(from)) return Drop(FrameDrop::kNotMember, from, "not a member");
  switch (parsed.body_case()) {
    case raftpb::Frame::kForwardRequest:
      if (departed) return Drop(FrameDrop::kNotMember, from, "removed: forwards a write");
      return routes_.forward_request(from, parsed.forward_request());
    case raftpb::Frame::kForwardResponse:
      return routes_.forward_response(from, parsed.forward_response());
    case raftpb::Frame::kMessage:
      return HandleMessage(from, std::move(*parsed.mutable_message()), departed);
    default: return Drop(FrameDrop::kUnparsable, from, "no message");
  }
}

void PeerFrameGate::HandleMessage(NodeId from, raftpb::Message message, bool departed) {
  if (NodeId(message.from()) != from) {
    return Drop(FrameDrop::kSenderMismatch, from,
                fmt::format("claims to come from {:x}", message.from()));
  }
  if (NodeId(message.to()) != self_) {
    return Drop(FrameDrop::kWrongRecipient, from,
                fmt::format("is addressed to {:x}", message.to()));
  }
  if (departed && message.type() != raftpb::TIMEOUT_NOW) {
    return Drop(FrameDrop::kNotMember, from, "removed: only its hand-over TimeoutNow is taken");
  }
  if (IsSnapshotTraffic(message)) return routes_.snapshot(std::move(message));
  Result<raft::Message> m = DecodeMessage(message);
  if (!m.ok()) return Drop(FrameDrop::kMalformed, from, m.status().message());
  if (m->type == raft::MessageType::kTimeoutNow) {
    const auto [leader, term] = routes_.leader();
    if (m->from != leader || m->term != term) {
      return Drop(FrameDrop::kTimeoutNotLeader, from,
                  fmt::format("TimeoutNow at term {} while the leader of term {} is {:x}", m->term,
                              term, leader));
    }
  }
  routes_.raft(std::move(*m));
}

void PeerFrameGate::Drop(FrameDrop reason, NodeId from, std::string_view detail) {
  drops_.Count(reason);
  // A hostile peer can send many: log the 1st, 2nd, 4th, 8th, ... of each reason.
  const std::uint64_t n = drops_.Get(reason);
  if ((n & (n - 1)) != 0) return;
  spdlog::warn("peer: node={:x} dropping a frame from {:x} ({}, {} so far): {}", self_, from,
               FrameDropName(reason), n, detail);
}

}  // namespace epoch::server
