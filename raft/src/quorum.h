// Majority arithmetic for one voter set (etcd raft's quorum.MajorityConfig, without joint
// configurations: membership changes one server at a time).
//
// Threading: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "epoch/raft/types.h"

namespace epoch::raft {

[[nodiscard]] inline std::size_t MajorityOf(std::size_t voters) { return voters / 2 + 1; }

// The largest v such that a majority of `values` (one per voter) are >= v: the commit index over
// match indexes (Raft §5.3), the confirmed heartbeat round over acknowledged rounds.
template <typename T>
[[nodiscard]] T MajorityValue(std::vector<T> values) {
  std::sort(values.begin(), values.end(), std::greater<T>());
  return values[MajorityOf(values.size()) - 1];
}

enum class VoteOutcome : std::uint8_t { kPending, kWon, kLost };

// Votes cast by voters (true = granted). Votes from non-voters are ignored.
[[nodiscard]] inline VoteOutcome TallyVotes(const std::vector<NodeId>& voters,
                                            const std::map<NodeId, bool>& votes) {
  std::size_t granted = 0;
  std::size_t rejected = 0;
  for (NodeId id : voters) {
    auto it = votes.find(id);
    if (it == votes.end()) continue;
    (it->second ? granted : rejected)++;
  }
  const std::size_t majority = MajorityOf(voters.size());
  if (granted >= majority) return VoteOutcome::kWon;
  if (rejected > voters.size() - majority) return VoteOutcome::kLost;
  return VoteOutcome::kPending;
}

}  // namespace epoch::raft
