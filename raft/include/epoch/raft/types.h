// Plain value types of the Raft core: log entries, hard state, configuration, snapshot metadata.
// These are the contract between raft/ (which produces them in Ready), wal/ (which persists them)
// and server/ (which converts them to and from protobuf at the edge). No protobuf here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epoch/strong_int.h"

namespace epoch::raft {

using epoch::LogIndex;
using epoch::NodeId;
using epoch::Term;

// NodeId(0) means "none" (no vote, no known leader), as in etcd raft.
inline constexpr NodeId kNoNode{0};

// Terms and indexes at or above this bound are beyond any real cluster's history (a term per
// nanosecond would take 146 years to reach it): a message carrying one is malformed, the peer
// codec refuses to decode it and the core drops it. Far below 2^64, so the core's own increments
// can never wrap.
inline constexpr std::uint64_t kMaxPlausibleValue = std::uint64_t{1} << 62;

enum class EntryType : std::uint8_t {
  kNormal = 0,      // opaque application command (or an empty no-op: data.empty())
  kConfChange = 1,  // data is an encoded ConfChange (see conf_change.h)
};

struct Entry {
  Term term;
  LogIndex index;
  EntryType type = EntryType::kNormal;
  std::string data;

  friend bool operator==(const Entry&, const Entry&) = default;
};

// What must be durable before a node answers a vote or acknowledges entries (Raft Fig. 2,
// "Persistent state on all servers").
struct HardState {
  Term term;        // current_term
  NodeId vote;      // voted_for in `term`, or kNoNode
  LogIndex commit;  // highest index known committed (persisted as a hint; safe to lose)

  [[nodiscard]] bool IsEmpty() const { return term.IsZero() && vote == kNoNode && commit.IsZero(); }
  friend bool operator==(const HardState&, const HardState&) = default;
};

// The cluster membership as of some log index.
struct ConfState {
  std::vector<NodeId> voters;
  std::vector<NodeId> learners;

  friend bool operator==(const ConfState&, const ConfState&) = default;
};

// Describes a snapshot: everything up to and including `index` is in the state-machine image.
struct SnapshotMeta {
  LogIndex index;
  Term term;
  ConfState conf;

  [[nodiscard]] bool IsEmpty() const { return index.IsZero(); }
  friend bool operator==(const SnapshotMeta&, const SnapshotMeta&) = default;
};

}  // namespace epoch::raft
