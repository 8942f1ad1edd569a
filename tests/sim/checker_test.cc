// Direct tests of the simulator's invariant checker on hand-made observations: each invariant
// must fire on a violation and stay quiet on the legal twin.
#include "checker.h"

#include <catch2/catch.hpp>

namespace epoch::sim {
namespace {

using raft::Role;

raft::Entry E(std::uint64_t term, std::uint64_t index, std::string data = "x") {
  return raft::Entry{Term(term), LogIndex(index), raft::EntryType::kNormal, std::move(data)};
}

ChainLog Log(std::initializer_list<raft::Entry> entries) {
  ChainLog log;
  log.Reset(LogIndex(1), Term(1), 0);  // the bootstrap snapshot
  for (const raft::Entry& e : entries) log.Append(e);
  return log;
}

NodeView View(std::uint64_t id, Role role, std::uint64_t term, const ChainLog* durable) {
  NodeView v;
  v.id = NodeId(id);
  v.up = true;
  v.role = role;
  v.term = Term(term);
  v.durable = durable;
  return v;
}

bool Has(const InvariantChecker& c, Invariant invariant) {
  for (const Violation& v : c.violations()) {
    if (v.invariant == invariant) return true;
  }
  return false;
}

const std::vector<NodeId> kVoters{NodeId(1), NodeId(2), NodeId(3)};

TEST_CASE("checker: two leaders in one term", "[sim][checker]") {
  ChainLog log = Log({});
  InvariantChecker ok;
  ok.AfterStep({View(1, Role::kLeader, 2, &log), View(2, Role::kLeader, 3, &log)}, {&kVoters}, 0);
  CHECK(ok.violations().empty());
  InvariantChecker bad;
  bad.AfterStep({View(1, Role::kLeader, 2, &log), View(2, Role::kLeader, 2, &log)}, {&kVoters}, 0);
  CHECK(Has(bad, Invariant::kElectionSafety));
}

TEST_CASE("checker: log matching and state-machine safety", "[sim][checker]") {
  InvariantChecker c;
  ChainLog a = Log({E(2, 2, "a"), E(2, 3, "b")});
  ChainLog b = Log({E(2, 2, "z"), E(2, 3, "b")});  // same (index 3, term 2), other prefix
  c.OnAppend(NodeId(1), a, LogIndex(2), 0);
  CHECK(c.violations().empty());
  c.OnAppend(NodeId(2), b, LogIndex(2), 0);
  CHECK(Has(c, Invariant::kLogMatching));

  InvariantChecker s;
  s.OnReady(NodeId(1), Role::kLeader, Term(2), a, LogIndex(3), 0);
  CHECK(s.committed_index() == LogIndex(3));
  s.OnReady(NodeId(2), Role::kFollower, Term(2), b, LogIndex(3), 0);
  CHECK(Has(s, Invariant::kStateMachineSafety));
}

TEST_CASE("checker: leader completeness", "[sim][checker]") {
  InvariantChecker c;
  ChainLog full = Log({E(2, 2), E(2, 3)});
  c.OnReady(NodeId(1), Role::kLeader, Term(2), full, LogIndex(3), 0);
  ChainLog stale = Log({E(2, 2)});
  c.OnReady(NodeId(2), Role::kLeader, Term(3), stale, LogIndex(1), 0);
  CHECK(Has(c, Invariant::kLeaderCompleteness));
}

TEST_CASE("checker: commit rule of Raft 5.4.2", "[sim][checker]") {
  InvariantChecker c;
  ChainLog log = Log({E(2, 2), E(3, 3)});
  c.OnReady(NodeId(1), Role::kLeader, Term(4), log, LogIndex(1), 0);  // becomes leader of term 4
  c.OnReady(NodeId(1), Role::kLeader, Term(4), log, LogIndex(3), 0);  // commits a term-3 entry
  CHECK(Has(c, Invariant::kCommitRule));
}

TEST_CASE("checker: committed entries must be durable on a quorum", "[sim][checker]") {
  InvariantChecker c;
  ChainLog log = Log({E(2, 2)});
  ChainLog empty = Log({});
  c.OnReady(NodeId(1), Role::kLeader, Term(2), log, LogIndex(2), 0);
  c.AfterStep({View(1, Role::kLeader, 2, &log), View(2, Role::kFollower, 2, &log),
               View(3, Role::kFollower, 2, &empty)},
              {&kVoters}, 0);
  CHECK(c.violations().empty());
  c.AfterStep({View(1, Role::kLeader, 2, &log), View(2, Role::kFollower, 2, &empty),
               View(3, Role::kFollower, 2, &empty)},
              {&kVoters}, 1);
  CHECK(Has(c, Invariant::kDurability));
}

TEST_CASE("checker: no lease read once a newer term committed", "[sim][checker]") {
  InvariantChecker c;
  c.OnLeaseRead(NodeId(1), Term(2), 100);
  CHECK(c.violations().empty());
  ChainLog log = Log({E(2, 2), E(3, 3)});
  c.OnReady(NodeId(2), Role::kLeader, Term(3), log, LogIndex(3), 200);
  CHECK(c.min_lease_margin_us() == 100);
  CHECK(c.violations().empty());
  c.OnLeaseRead(NodeId(1), Term(2), 250);
  CHECK(Has(c, Invariant::kLeaseSafety));

  InvariantChecker held;
  held.OnReady(NodeId(2), Role::kLeader, Term(3), log, LogIndex(3), 200);
  NodeView old_leader = View(1, Role::kLeader, 2, &log);
  old_leader.lease_valid = true;
  held.AfterStep({old_leader}, {&kVoters}, 300);
  CHECK(Has(held, Invariant::kLeaseSafety));
}

}  // namespace
}  // namespace epoch::sim
