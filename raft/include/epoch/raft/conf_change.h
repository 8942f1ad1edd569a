// Membership changes, one server at a time (Raft dissertation §4.1–4.3), with learners.
//
// A ConfChange travels as the data of an EntryType::kConfChange log entry, encoded with
// EncodeConfChange. It takes effect on a node when that node *applies* the entry (hands it out in
// Ready::committed_entries and gets Advance), as in etcd raft; the leader accepts a new one only
// once the previous one is applied and it has committed an entry of its own term.
//
// A cluster starts from BootstrapSnapshot(voters): every initial member's log starts with that
// snapshot (index 1, term 1, empty state machine); a node that joins later starts with an empty
// log and receives the leader's snapshot, so its configuration always comes from the log.
//
// Threading: pure functions and values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/status.h"

namespace epoch::raft {

enum class ConfChangeType : std::uint8_t {
  kAddLearner = 1,      // add a non-voting member that receives the log
  kPromoteLearner = 2,  // make a caught-up learner a voter
  kRemoveNode = 3,      // remove a voter or a learner (possibly the leader itself)
  kAddVoter = 4,        // add a voter directly (etcd's MemberAdd without is_learner)
  kUpdateNode = 5,      // the configuration is unchanged; the context carries the change
};

struct ConfChange {
  ConfChangeType type = ConfChangeType::kAddLearner;
  NodeId node;
  // Opaque to the core (etcd's ConfChange.Context): the server carries its member-table change
  // here so that it applies with the configuration change, in the same entry.
  std::string context{};

  friend bool operator==(const ConfChange&, const ConfChange&) = default;
};

// Little-endian: type (1 byte), node id (8 bytes), then the context bytes (possibly none).
inline constexpr std::size_t kConfChangeHeaderBytes = 9;
[[nodiscard]] std::string EncodeConfChange(const ConfChange& change);
// std::nullopt on a malformed encoding.
[[nodiscard]] std::optional<ConfChange> DecodeConfChange(std::string_view data);

// The configuration after applying `change` to `conf`, or InvalidArgument naming why it cannot
// apply (adding an existing member, promoting a non-learner, removing or updating a non-member,
// removing the last voter). Voters and learners stay sorted.
[[nodiscard]] Result<ConfState> ApplyConfChange(const ConfState& conf, const ConfChange& change);

[[nodiscard]] bool IsVoter(const ConfState& conf, NodeId id);
[[nodiscard]] bool IsLearner(const ConfState& conf, NodeId id);

inline constexpr LogIndex kBootstrapIndex{1};
inline constexpr Term kBootstrapTerm{1};
// The snapshot every initial member starts from: index 1, term 1, the given voters (sorted).
// With it the driver persists HardState{term 1, no vote, commit 1}.
[[nodiscard]] SnapshotMeta BootstrapSnapshot(std::vector<NodeId> voters);

}  // namespace epoch::raft
