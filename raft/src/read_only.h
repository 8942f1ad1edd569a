// Leader-side bookkeeping for linearizable reads (Raft dissertation §6.4) and the leader lease:
//   - HeartbeatRounds numbers each broadcast round and remembers the tick it was sent at, so an
//     acknowledged round both confirms leadership (ReadIndex) and starts a lease (raft/DESIGN.md
//     §4: lease start = SEND time of the acknowledged round);
//   - ReadOnly queues ReadIndex requests until a round sent after them is acknowledged by a
//     quorum (requests made before the same round share it), and holds requests that arrive
//     before the leader has committed an entry of its term.
//
// Threading: owned by one Raft instance.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "epoch/raft/types.h"

namespace epoch::raft {

class HeartbeatRounds {
 public:
  // Starts a new round sent at `now`; returns its id (ids start at 1 and increase).
  std::uint64_t Start(std::int64_t now_ticks);
  [[nodiscard]] std::uint64_t last() const { return last_; }
  // Send tick of `round`, if still remembered.
  [[nodiscard]] std::optional<std::int64_t> SentTick(std::uint64_t round) const;
  // Forget rounds older than `round` (they can no longer start a later lease).
  void ForgetBefore(std::uint64_t round);
  void Reset();

 private:
  static constexpr std::size_t kMaxRemembered = 4096;
  std::uint64_t last_ = 0;
  std::deque<std::pair<std::uint64_t, std::int64_t>> sent_;  // (round, tick), ascending
};

struct PendingRead {
  std::uint64_t context = 0;
  NodeId from;              // the requester (the leader itself for local requests)
  LogIndex index;           // commit index when the request arrived
  std::uint64_t round = 0;  // first round that confirms it (sent after the request)
};

class ReadOnly {
 public:
  void Add(const PendingRead& read) { pending_.push_back(read); }
  // Removes and returns the reads confirmed once a quorum acknowledged `round`.
  std::vector<PendingRead> Release(std::uint64_t acked_round);
  [[nodiscard]] bool HasUnsent(std::uint64_t last_sent_round) const;
  void AddWaitingCommit(std::uint64_t context, NodeId from) {
    waiting_commit_.emplace_back(context, from);
  }
  std::vector<std::pair<std::uint64_t, NodeId>> TakeWaitingCommit();
  void Clear();
  [[nodiscard]] std::size_t pending() const { return pending_.size() + waiting_commit_.size(); }

 private:
  std::deque<PendingRead> pending_;  // ascending by round
  std::vector<std::pair<std::uint64_t, NodeId>> waiting_commit_;
};

// The maximum of a signal over the last one to two windows (for adaptive timeouts: a latency
// spike raises the election timeout, and is forgotten two windows later).
class WindowedMax {
 public:
  explicit WindowedMax(std::int64_t window_ticks) : window_(window_ticks) {}
  void Observe(std::int64_t value, std::int64_t now_ticks);
  [[nodiscard]] std::int64_t Get(std::int64_t now_ticks) const;

 private:
  void Roll(std::int64_t now_ticks);
  std::int64_t window_;
  std::int64_t window_start_ = 0;
  std::int64_t current_ = 0;
  std::int64_t previous_ = 0;
};

}  // namespace epoch::raft
