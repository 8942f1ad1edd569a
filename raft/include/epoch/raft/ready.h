// Ready: everything the core asks its driver to do, handed out by Node::GetReady() and
// acknowledged with Node::Advance(). See raft/DESIGN.md "Driving the core" for the required order;
// in short:
//   1. persist snapshot (install the image received out of band, then its meta), entries (truncate
//      the suffix first if entries.front().index <= the last persisted index) and hard_state,
//      syncing if must_sync; `messages` may be sent before or while this happens;
//   2. send messages_after_persist only once step 1 is durable;
//   3. apply committed_entries in order (kNormal to the state machine; kConfChange entries are
//      applied by the core itself at Advance, the driver may decode them to connect peers); the
//      first durable_committed of them may be applied before or while step 1 runs;
//   4. serve read_states once the state machine has applied >= index;
//   5. call Advance(ready).
//
// Threading: a plain value, produced and consumed on the driver's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "epoch/raft/message.h"
#include "epoch/raft/types.h"

namespace epoch::raft {

enum class Role : std::uint8_t { kFollower, kPreCandidate, kCandidate, kLeader };

[[nodiscard]] std::string_view RoleName(Role role);

// Volatile state the driver may want to show or act on (metrics, leader hints to clients).
struct SoftState {
  Role role = Role::kFollower;
  NodeId leader;
  Term term;

  friend bool operator==(const SoftState&, const SoftState&) = default;
};

// A confirmed linearizable read: serve the read identified by `context` once the state machine
// has applied an index >= `index`.
struct ReadState {
  std::uint64_t context = 0;
  LogIndex index;
  bool via_lease = false;  // confirmed by the leader lease (no heartbeat round)

  friend bool operator==(const ReadState&, const ReadState&) = default;
};

struct Ready {
  std::optional<SoftState> soft_state;  // set when role, leader or term changed
  std::optional<HardState> hard_state;  // set when term, vote or commit changed: persist it
  // Entries to append durably, contiguous and ascending. If entries.front().index is <= the last
  // persisted index, the persisted suffix from that index on is discarded first.
  std::vector<Entry> entries;
  // A snapshot received from the leader: install the image the driver received with it, then
  // persist this meta (the persisted log becomes empty after snapshot.index). Comes before
  // `entries` (which then start after it).
  std::optional<SnapshotMeta> snapshot;
  // Send now, in any order relative to persisting this Ready (e.g. the leader's AppendEntries:
  // the leader replicates before its own append is durable).
  std::vector<Message> messages;
  // Send only once everything in this Ready is durable (votes, append and snapshot responses,
  // the candidate's vote requests).
  std::vector<Message> messages_after_persist;
  // Committed entries to apply, in order, contiguous. They may include entries of this Ready's
  // `entries`: persist before applying. After a restart they start right after the snapshot:
  // the driver skips those its state machine has already applied.
  std::vector<Entry> committed_entries;
  // How many of committed_entries (a prefix) an earlier Ready already made durable and this one
  // does not overwrite: they may be applied before or while this Ready is persisted (as etcd
  // applies while its WAL write is in flight), so a commit does not wait for the next fsync.
  // The rest may be among this Ready's own `entries`: apply them only after step 1.
  std::size_t durable_committed = 0;
  std::vector<ReadState> read_states;
  // The applied membership changed (after an Advance that applied a kConfChange entry, or a
  // snapshot install): connect to new peers, drop removed ones.
  std::optional<ConfState> conf_state;
  // True when hard_state's term or vote changed or there are entries or a snapshot: the write must
  // be fsynced before messages_after_persist are sent.
  bool must_sync = false;
  // Pairs this Ready with its Advance (checked by the core).
  std::uint64_t sequence = 0;

  [[nodiscard]] bool Empty() const {
    return !soft_state && !hard_state && entries.empty() && !snapshot && messages.empty() &&
           messages_after_persist.empty() && committed_entries.empty() && read_states.empty() &&
           !conf_state;
  }
};

}  // namespace epoch::raft
