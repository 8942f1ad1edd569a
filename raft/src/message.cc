#include "epoch/raft/message.h"

#include <fmt/format.h>

#include "epoch/raft/ready.h"

namespace epoch::raft {

std::string_view MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kAppendEntries: return "AppendEntries";
    case MessageType::kAppendEntriesResponse: return "AppendEntriesResponse";
    case MessageType::kRequestVote: return "RequestVote";
    case MessageType::kRequestVoteResponse: return "RequestVoteResponse";
    case MessageType::kPreVote: return "PreVote";
    case MessageType::kPreVoteResponse: return "PreVoteResponse";
    case MessageType::kHeartbeat: return "Heartbeat";
    case MessageType::kHeartbeatResponse: return "HeartbeatResponse";
    case MessageType::kInstallSnapshot: return "InstallSnapshot";
    case MessageType::kTimeoutNow: return "TimeoutNow";
    case MessageType::kReadIndex: return "ReadIndex";
    case MessageType::kReadIndexResponse: return "ReadIndexResponse";
  }
  return "Unknown";
}

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kFollower: return "follower";
    case Role::kPreCandidate: return "pre-candidate";
    case Role::kCandidate: return "candidate";
    case Role::kLeader: return "leader";
  }
  return "unknown";
}

std::uint64_t Message::EntryBytes() const {
  std::uint64_t bytes = 0;
  for (const Entry& e : entries) bytes += e.data.size();
  return bytes;
}

bool IsFromLeader(MessageType type) {
  switch (type) {
    case MessageType::kAppendEntries:
    case MessageType::kHeartbeat:
    case MessageType::kInstallSnapshot:
    case MessageType::kTimeoutNow:
    case MessageType::kReadIndexResponse: return true;
    default: return false;
  }
}

bool IsResponse(MessageType type) {
  switch (type) {
    case MessageType::kAppendEntriesResponse:
    case MessageType::kRequestVoteResponse:
    case MessageType::kPreVoteResponse:
    case MessageType::kHeartbeatResponse:
    case MessageType::kReadIndexResponse: return true;
    default: return false;
  }
}

std::string DescribeMessage(const Message& m) {
  std::string out = fmt::format("{} {}->{} t{} i{}/t{}", MessageTypeName(m.type), m.from, m.to,
                                m.term, m.index, m.log_term);
  if (!m.entries.empty()) {
    out += fmt::format(" n={} [{}..{}]", m.entries.size(), m.entries.front().index,
                       m.entries.back().index);
  }
  if (!m.commit.IsZero()) out += fmt::format(" c{}", m.commit);
  if (m.reject) out += fmt::format(" reject hint={}", m.reject_hint);
  if (m.round != 0) out += fmt::format(" r{}", m.round);
  if (m.context != 0) out += fmt::format(" ctx={}", m.context);
  if (m.transfer) out += " transfer";
  if (m.snapshot) out += fmt::format(" snap={}/t{}", m.snapshot->index, m.snapshot->term);
  return out;
}

}  // namespace epoch::raft
