// Progress: the leader's replication state for one peer (etcd raft's tracker.Progress), and
// Inflights, the window of AppendEntries sent but not yet acknowledged.
//
//          +--------------------- snapshot done / failed ----------------------+
//          v                                                                    |
//   +-----------+  accepted append   +-------------+   needs compacted    +-----------+
//   |   Probe   | -----------------> |  Replicate  | ---- entries ------> |  Snapshot |
//   +-----------+ <----------------- +-------------+                      +-----------+
//      |    ^       reject / unreachable                                        ^
//      +----|------------------ needs compacted entries ------------------------+
//
// Probe: one message per heartbeat interval (or per response) until the follower's match point is
// found; Replicate: optimistic pipelining, next advances on send, bounded by Inflights; Snapshot:
// nothing is sent until the snapshot transfer is reported or acknowledged.
//
// Threading: owned by one Raft instance.
#pragma once

#include <cstdint>
#include <deque>

#include "epoch/raft/node.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

class Inflights {
 public:
  Inflights(std::uint64_t max_count, std::uint64_t max_bytes)
      : max_count_(max_count), max_bytes_(max_bytes) {}

  void Add(LogIndex last, std::uint64_t bytes);
  // Frees every message whose last index is <= index (acknowledged).
  void FreeLE(LogIndex index);
  // Frees the oldest message (presumed lost).
  void FreeFirst();
  void Reset();
  [[nodiscard]] bool Full() const { return count() >= max_count_ || bytes_ >= max_bytes_; }
  [[nodiscard]] std::uint64_t count() const { return window_.size(); }
  [[nodiscard]] std::uint64_t bytes() const { return bytes_; }

 private:
  struct Inflight {
    LogIndex last;
    std::uint64_t bytes;
  };
  std::uint64_t max_count_;
  std::uint64_t max_bytes_;
  std::deque<Inflight> window_;  // ascending by last
  std::uint64_t bytes_ = 0;      // sum of window_[*].bytes
};

struct Progress {
  Progress(LogIndex next_index, std::uint64_t max_inflight_msgs, std::uint64_t max_inflight_bytes)
      : next(next_index), inflights(max_inflight_msgs, max_inflight_bytes) {}

  // match_index (Raft Fig. 2): highest index known replicated on the peer. Invariant:
  // match < next. For the leader itself, match is its durable index.
  LogIndex match;
  LogIndex next;
  ProgressState state = ProgressState::kProbe;
  // Probe: a message is in flight; wait for its answer (or the next heartbeat answer).
  bool probe_sent = false;
  // Snapshot: index of the snapshot being sent.
  LogIndex pending_snapshot;
  // Heard from since the last check-quorum interval.
  bool recent_active = false;
  bool learner = false;
  // Highest heartbeat round the peer acknowledged (leader lease, ReadIndex).
  std::uint64_t acked_round = 0;
  // The election floor of the peer's latest answer (0: none yet in this term).
  std::int64_t reported_floor = 0;
  Inflights inflights;

  void BecomeProbe();
  void BecomeReplicate();
  void BecomeSnapshot(LogIndex snapshot_index);
  // An accepted append up to `index`; returns whether match advanced.
  bool MaybeUpdate(LogIndex index);
  // A rejected append of prev index `rejected`, the leader-side hint `hint` (largest index that
  // may match). Returns false when the rejection is stale.
  bool MaybeDecrTo(LogIndex rejected, LogIndex hint);
  // An AppendEntries carrying entries up to `last` (or none: last = next - 1) was sent.
  void SentEntries(LogIndex last, std::uint64_t bytes, bool had_entries);
  [[nodiscard]] bool IsPaused() const;
};

}  // namespace epoch::raft
