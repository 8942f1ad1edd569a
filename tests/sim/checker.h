// InvariantChecker: the simulator's global-knowledge safety checks, run after every step. It sees
// every node's mirrored log, durable log, role, term and lease, which no real node can, and so
// checks Raft's properties (Raft paper Fig. 3) directly:
//   - election safety: at most one leader per term;
//   - log matching: two logs with an entry of the same index and term agree on the whole prefix
//     (compared through hash chains, at every append);
//   - leader completeness: a leader of term t holds every entry known committed in a term < t;
//   - state-machine safety: every node's committed prefix and every applied entry agree with one
//     global committed log;
//   - commit rule (Raft §5.4.2, Fig. 2 "Rules for Leaders"): while it leads, a leader moves its
//     commit index only to entries of its own term (older ones are committed through them);
//   - durability: every entry known committed is in the durable log of a majority (so it
//     survives any crash pattern; checked after every step and at every crash);
//   - lease safety: no node serves a lease read, or even holds a valid lease, at term t once an
//     entry of a term > t is known committed (the old leader's lease must end before a newer
//     leader can commit: docs/timing-and-safety.md §5.2).
// "Known committed" means some node's commit index covered it when that node handed out a Ready;
// an observation by a node in term T proves the entry was committed in a term <= T.
//
// Who uses it: SimNode reports Readies, appends, applies and lease reads; Simulation calls
// AfterStep with a view of every node.
//
// Threading: single-threaded, owned by the Simulation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "chain_log.h"
#include "epoch/raft/ready.h"
#include "epoch/raft/types.h"

namespace epoch::sim {

enum class Invariant : std::uint8_t {
  kElectionSafety,
  kLogMatching,
  kLeaderCompleteness,
  kStateMachineSafety,
  kCommitRule,
  kDurability,
  kLeaseSafety,
  kLinearizability,
  kLiveness,
  kConvergence,
};
inline constexpr int kInvariantCount = 10;
[[nodiscard]] std::string_view InvariantName(Invariant invariant);

struct Violation {
  Invariant invariant;
  std::int64_t time_us;
  std::string what;
};

// What AfterStep needs to know about one node.
struct NodeView {
  NodeId id;
  bool up = false;
  raft::Role role = raft::Role::kFollower;
  Term term;
  bool lease_valid = false;
  const ChainLog* durable = nullptr;
};

class InvariantChecker {
 public:
  InvariantChecker();

  // A node handed out a Ready: `mirror` is its log as the core holds it (updated with this
  // Ready's entries), `commit` its commit index, role and term as of now.
  void OnReady(NodeId id, raft::Role role, Term term, const ChainLog& mirror, LogIndex commit,
               std::int64_t now);
  // Entries [from, mirror.last()] were just (re)written in the node's mirrored log.
  void OnAppend(NodeId id, const ChainLog& mirror, LogIndex from, std::int64_t now);
  void OnApply(NodeId id, const ChainLog& durable, const raft::Entry& entry, std::int64_t now);
  // The core confirmed a read by its lease (ReadIndex returned kLease) at `term`.
  void OnLeaseRead(NodeId id, Term term, std::int64_t now);
  // After every simulation step. nodes[i] has id i + 1. `voter_sets`: the configurations nodes
  // may be using (the latest applied and the one before it).
  void AfterStep(const std::vector<NodeView>& nodes,
                 std::initializer_list<const std::vector<NodeId>*> voter_sets, std::int64_t now);
  // Records a violation found elsewhere (linearizability, liveness, convergence).
  void Report(Invariant invariant, std::int64_t now, std::string what);

  [[nodiscard]] const std::vector<Violation>& violations() const { return violations_; }
  [[nodiscard]] std::uint64_t leaders_elected() const { return term_leader_.size(); }
  [[nodiscard]] LogIndex committed_index() const { return LogIndex(commit_chain_.size() - 1); }
  // Chain value of the committed log at `index` (0 if not known committed).
  [[nodiscard]] std::uint64_t CommittedChainAt(LogIndex index) const {
    return index.value() < commit_chain_.size() ? commit_chain_[index.value()] : 0;
  }
  [[nodiscard]] Term max_committed_entry_term() const { return max_committed_term_; }
  [[nodiscard]] std::uint64_t lease_reads() const { return lease_reads_; }
  // Smallest observed gap between a lease read and the first commit of a newer term
  // (microseconds); negative would be a violation. INT64_MAX if never measured.
  [[nodiscard]] std::int64_t min_lease_margin_us() const { return min_lease_margin_us_; }

 private:
  void CheckCommitted(NodeId id, Term term, const ChainLog& mirror, LogIndex commit,
                      std::int64_t now);
  void CheckLeaderCompleteness(NodeId id, Term term, const ChainLog& mirror, std::int64_t now);
  [[nodiscard]] LogIndex CommittedBefore(Term term) const;

  std::map<Term, NodeId> term_leader_;
  // Per leader id: the term it leads and its commit index when it first reported as leader.
  std::map<NodeId, std::pair<Term, LogIndex>> leader_start_commit_;
  // (index, term) -> hash chain of the prefix ending there (log matching).
  std::map<std::pair<LogIndex, Term>, std::uint64_t> chain_at_;
  // The global committed log: chain and term per index; index 0 is a sentinel, index 1 the
  // bootstrap snapshot every initial member starts from.
  std::vector<std::uint64_t> commit_chain_;
  std::vector<Term> commit_term_;
  // For each observing term T, the largest index a node in term T knew committed.
  std::map<Term, LogIndex> commit_frontier_;
  Term max_committed_term_;
  std::int64_t first_commit_time_of_max_term_ = 0;
  // Entry hash applied at each index (state-machine safety).
  std::vector<std::uint64_t> applied_;
  // Last lease read per term (for the margin statistic).
  std::map<Term, std::int64_t> last_lease_read_;
  std::uint64_t lease_reads_ = 0;
  std::int64_t min_lease_margin_us_;
  std::vector<Violation> violations_;
};

}  // namespace epoch::sim
