#include "checker.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "epoch/raft/conf_change.h"

namespace epoch::sim {

std::string_view InvariantName(Invariant invariant) {
  switch (invariant) {
    case Invariant::kElectionSafety: return "election-safety";
    case Invariant::kLogMatching: return "log-matching";
    case Invariant::kLeaderCompleteness: return "leader-completeness";
    case Invariant::kStateMachineSafety: return "state-machine-safety";
    case Invariant::kCommitRule: return "commit-rule";
    case Invariant::kDurability: return "committed-durability";
    case Invariant::kLeaseSafety: return "lease-safety";
    case Invariant::kLinearizability: return "linearizability";
    case Invariant::kLiveness: return "liveness";
    case Invariant::kConvergence: return "convergence";
  }
  return "?";
}

InvariantChecker::InvariantChecker()
    : commit_chain_{0, 0},
      commit_term_{Term(0), raft::kBootstrapTerm},
      max_committed_term_(raft::kBootstrapTerm),
      applied_{0, 0},
      min_lease_margin_us_(std::numeric_limits<std::int64_t>::max()) {}

void InvariantChecker::Report(Invariant invariant, std::int64_t now, std::string what) {
  violations_.push_back(Violation{invariant, now, std::move(what)});
}

void InvariantChecker::OnAppend(NodeId id, const ChainLog& mirror, LogIndex from,
                                std::int64_t now) {
  // Log matching (Raft §5.3): the same (index, term) anywhere implies the same prefix.
  for (LogIndex i = from; i <= mirror.last(); ++i) {
    auto [it, inserted] = chain_at_.try_emplace({i, mirror.TermAt(i)}, mirror.ChainAt(i));
    if (!inserted && it->second != mirror.ChainAt(i)) {
      Report(Invariant::kLogMatching, now,
             fmt::format("node {} holds entry {} of term {} whose log prefix differs from "
                         "another node's entry with the same index and term",
                         id, i, mirror.TermAt(i)));
      return;
    }
  }
}

LogIndex InvariantChecker::CommittedBefore(Term term) const {
  LogIndex best{0};
  for (const auto& [observed_in, index] : commit_frontier_) {
    if (observed_in >= term) break;
    best = std::max(best, index);
  }
  return best;
}

void InvariantChecker::CheckLeaderCompleteness(NodeId id, Term term, const ChainLog& mirror,
                                               std::int64_t now) {
  // Raft §5.4.1 (Leader Completeness): every entry committed in a term < `term` is in the log
  // of the leader of `term`.
  LogIndex c = std::min(CommittedBefore(term), committed_index());
  if (c <= mirror.base()) return;  // covered by the node's snapshot
  if (!mirror.Has(c) || mirror.ChainAt(c) != commit_chain_[c.value()]) {
    Report(Invariant::kLeaderCompleteness, now,
           fmt::format("leader {} of term {} lacks committed entry {} (term {}); its log ends "
                       "at {}",
                       id, term, c, commit_term_[c.value()], mirror.last()));
  }
}

void InvariantChecker::CheckCommitted(NodeId id, Term term, const ChainLog& mirror, LogIndex commit,
                                      std::int64_t now) {
  if (commit <= mirror.base()) return;
  if (!mirror.Has(commit)) {
    Report(Invariant::kStateMachineSafety, now,
           fmt::format("node {} reports commit {} beyond its last entry {}", id, commit,
                       mirror.last()));
    return;
  }
  LogIndex known = committed_index();
  LogIndex probe = std::min(known, commit);
  if (probe > mirror.base() && mirror.ChainAt(probe) != commit_chain_[probe.value()]) {
    Report(Invariant::kStateMachineSafety, now,
           fmt::format("node {} (term {}) has committed entry {} of term {}, but the entry "
                       "committed there is of term {} (different committed logs)",
                       id, term, probe, mirror.TermAt(probe), commit_term_[probe.value()]));
    return;
  }
  LogIndex& frontier = commit_frontier_[term];
  frontier = std::max(frontier, commit);
  for (LogIndex i = known.Next(); i <= commit; ++i) {
    commit_chain_.push_back(mirror.ChainAt(i));
    commit_term_.push_back(mirror.TermAt(i));
  }
  Term newest = commit_term_.back();
  if (newest > max_committed_term_) {
    max_committed_term_ = newest;
    first_commit_time_of_max_term_ = now;
    for (const auto& [lease_term, read_time] : last_lease_read_) {
      if (lease_term < newest)
        min_lease_margin_us_ = std::min(min_lease_margin_us_, now - read_time);
    }
  }
}

void InvariantChecker::OnReady(NodeId id, raft::Role role, Term term, const ChainLog& mirror,
                               LogIndex commit, std::int64_t now) {
  CheckCommitted(id, term, mirror, commit, now);
  if (role != raft::Role::kLeader) return;
  CheckLeaderCompleteness(id, term, mirror, now);
  // Raft §5.4.2: a leader's commit index moves only onto entries of its own term.
  auto [it, inserted] = leader_start_commit_.try_emplace(id, term, commit);
  if (!inserted && it->second.first != term) it->second = {term, commit};
  if (commit > it->second.second && mirror.Has(commit) && mirror.TermAt(commit) != term) {
    Report(Invariant::kCommitRule, now,
           fmt::format("leader {} of term {} advanced its commit index from {} to {}, an entry "
                       "of term {}: only current-term entries are committed by counting",
                       id, term, it->second.second, commit, mirror.TermAt(commit)));
  }
}

void InvariantChecker::OnApply(NodeId id, const ChainLog& durable, const raft::Entry& entry,
                               std::int64_t now) {
  // An entry is applied only once the node's own log holds it durably: otherwise a crash could
  // leave the state machine ahead of the log it replays (ready.h, durable_committed).
  if (!durable.Has(entry.index) || durable.TermAt(entry.index) != entry.term) {
    Report(Invariant::kDurability, now,
           fmt::format("node {} applied entry {} (term {}) before its own log held it durably", id,
                       entry.index, entry.term));
  }
  auto i = static_cast<std::size_t>(entry.index.value());
  std::uint64_t h = ChainLog::EntryHash(entry);
  if (i >= applied_.size()) applied_.resize(i + 1, 0);
  if (applied_[i] == 0) {
    applied_[i] = h;
  } else if (applied_[i] != h) {
    Report(Invariant::kStateMachineSafety, now,
           fmt::format("node {} applied entry {} (term {}) but another node applied a different "
                       "entry at that index",
                       id, entry.index, entry.term));
  }
  if (i >= commit_term_.size() || commit_term_[i] != entry.term) {
    Report(Invariant::kStateMachineSafety, now,
           fmt::format("node {} applied entry {} (term {}) that is not the known committed entry",
                       id, entry.index, entry.term));
  }
}

void InvariantChecker::OnLeaseRead(NodeId id, Term term, std::int64_t now) {
  ++lease_reads_;
  last_lease_read_[term] = now;
  if (max_committed_term_ > term) {
    Report(Invariant::kLeaseSafety, now,
           fmt::format("node {} served a lease read in term {} although an entry of term {} was "
                       "committed {} us earlier",
                       id, term, max_committed_term_, now - first_commit_time_of_max_term_));
  }
}

void InvariantChecker::AfterStep(const std::vector<NodeView>& nodes,
                                 std::initializer_list<const std::vector<NodeId>*> voter_sets,
                                 std::int64_t now) {
  for (const NodeView& n : nodes) {
    if (!n.up) continue;
    if (n.role == raft::Role::kLeader) {
      auto [it, inserted] = term_leader_.try_emplace(n.term, n.id);
      if (!inserted && it->second != n.id) {
        Report(Invariant::kElectionSafety, now,
               fmt::format("two leaders in term {}: nodes {} and {}", n.term, it->second, n.id));
      }
    }
    if (n.lease_valid && max_committed_term_ > n.term) {
      Report(Invariant::kLeaseSafety, now,
             fmt::format("node {} holds a valid lease in term {} although an entry of term {} was "
                         "committed {} us earlier",
                         n.id, n.term, max_committed_term_, now - first_commit_time_of_max_term_));
    }
  }
  // Durability: the latest committed entry (and so, by log matching, every earlier one) must be
  // in the durable log of enough voters that no quorum of any configuration in use lacks it:
  // otherwise a crash of the holders could let a leader without it be elected.
  const LogIndex c = committed_index();
  if (c.value() <= 1) return;
  auto holds = [&](NodeId id) {
    const std::size_t i = id.value() - 1;
    if (i >= nodes.size() || nodes[i].durable == nullptr) return false;
    const ChainLog& d = *nodes[i].durable;
    return (d.Has(c) && d.ChainAt(c) == commit_chain_[c.value()]) || d.base() > c;
  };
  for (const std::vector<NodeId>* voters : voter_sets) {
    std::size_t missing = 0;
    for (NodeId v : *voters) missing += holds(v) ? 0 : 1;
    const std::size_t quorum = voters->size() / 2 + 1;
    if (!voters->empty() && missing >= quorum) {
      Report(Invariant::kDurability, now,
             fmt::format("committed entry {} (term {}) is missing from the durable logs of {} of "
                         "{} voters: a quorum without it could elect a leader",
                         c, commit_term_[c.value()], missing, voters->size()));
      return;
    }
  }
}

}  // namespace epoch::sim
