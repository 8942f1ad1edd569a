// Message: the one plain C++ type for every peer-to-peer Raft message, in the style of etcd's
// raftpb.Message (one struct, a type tag, fields used per type). The core produces messages in
// Ready and consumes them in Node::Step; server/ converts them to protobuf for the wire, the
// simulator delivers them as they are. Snapshot *data* never travels in a Message: the driver
// streams it out of band (see MessageType::kInstallSnapshot).
//
// Threading: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/raft/types.h"

namespace epoch::raft {

enum class MessageType : std::uint8_t {
  // Leader -> follower: entries after (index, log_term), the leader's commit (Raft §5.3).
  // `round` is the latest heartbeat round the leader had sent when it sent this message.
  kAppendEntries = 0,
  // Follower -> leader. Accept: index = last index known to match the leader's log.
  // Reject: index = the rejected prev index; reject_hint / log_term = conflict hint: the largest
  // index <= min(prev index, follower's last index) whose term is <= the leader's prev term, and
  // that term (fast backtracking). Also the answer to kInstallSnapshot (index = snapshot index).
  kAppendEntriesResponse = 1,
  // Candidate -> all: term, last log index / term (Raft §5.2, §5.4.1). `transfer` is set when the
  // election was started by kTimeoutNow: voters then ignore vote withholding.
  kRequestVote = 2,
  kRequestVoteResponse = 3,  // reject = vote refused
  // Pre-candidate -> all: "would you vote for me at `term`?" (term = the candidate's term + 1;
  // nobody changes term or vote; dissertation §9.6).
  kPreVote = 4,
  kPreVoteResponse = 5,  // term = the asked term when granted, the responder's term when not
  // Leader -> follower: commit = min(follower's match, leader's commit); `round` identifies the
  // heartbeat round (leader lease and ReadIndex confirmation).
  kHeartbeat = 6,
  kHeartbeatResponse = 7,  // echoes `round`
  // Leader -> follower: install the snapshot described by `snapshot`. The driver sends the meta
  // with the state-machine image in chunks; the receiving driver steps this message into its core
  // once every chunk has arrived, keeping the image until Ready::snapshot asks to install it.
  kInstallSnapshot = 8,
  // Leader -> transfer target: start an election now, bypassing pre-vote (dissertation §3.10).
  kTimeoutNow = 9,
  // Follower -> leader: please confirm a linearizable read; `context` identifies it.
  kReadIndex = 10,
  // Leader -> follower: the read of `context` may be served once applied >= index. reject = the
  // leader could not serve it (it is no longer leader).
  kReadIndexResponse = 11,
};

[[nodiscard]] std::string_view MessageTypeName(MessageType type);

struct Message {
  MessageType type = MessageType::kAppendEntries;
  NodeId from;
  NodeId to;
  Term term;  // the sender's current term (PreVote: the term it would campaign at)

  Term log_term;   // AppendEntries: term of entry `index`; votes: last log term; reject hint term
  LogIndex index;  // AppendEntries: prev index; votes: last log index; responses: see above
  std::vector<Entry> entries;
  LogIndex commit;  // leader's commit index (AppendEntries, Heartbeat)

  bool reject = false;
  LogIndex reject_hint;

  std::uint64_t round = 0;    // heartbeat round (leader -> follower, echoed back)
  std::uint64_t context = 0;  // ReadIndex request id
  bool transfer = false;      // vote requests started by TimeoutNow
  bool via_lease = false;     // ReadIndexResponse: confirmed by the leader lease
  // AppendEntriesResponse, HeartbeatResponse: the sender's election floor (ticks) when it
  // answered; it withholds (pre)votes for at least that long after the leader message answered.
  // The leader's lease takes the smallest floor of the acknowledging quorum.
  std::int64_t floor = 0;

  std::optional<SnapshotMeta> snapshot;  // kInstallSnapshot only

  // Sum of entry data sizes (what the byte-based flow control counts).
  [[nodiscard]] std::uint64_t EntryBytes() const;

  friend bool operator==(const Message&, const Message&) = default;
};

// True for messages that only a leader sends (AppendEntries, Heartbeat, InstallSnapshot,
// TimeoutNow, ReadIndexResponse): receiving one in the sender's term means the sender is leader.
[[nodiscard]] bool IsFromLeader(MessageType type);
// True for responses (the kinds whose sender answers a request).
[[nodiscard]] bool IsResponse(MessageType type);

// "AppendEntries 1->2 t3 i5/t2 n=2 c4" — for logs and test failure output.
[[nodiscard]] std::string DescribeMessage(const Message& message);

}  // namespace epoch::raft
