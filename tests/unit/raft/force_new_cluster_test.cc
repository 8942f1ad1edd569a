// Forcing a one-member cluster from one member's log (force_new_cluster.h): the forced
// configuration, the discarded uncommitted suffix, and a core restarted on the forced log that
// elects itself alone and keeps every committed entry.
#include "epoch/raft/force_new_cluster.h"

#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

ConfState Conf(std::vector<std::uint64_t> voters, std::vector<std::uint64_t> learners = {}) {
  ConfState conf;
  for (std::uint64_t v : voters) conf.voters.push_back(Id(v));
  for (std::uint64_t l : learners) conf.learners.push_back(Id(l));
  return conf;
}

ConfChange Change(ConfChangeType type, std::uint64_t node) {
  return ConfChange{type, Id(node), {}};
}

Entry ConfEntry(std::uint64_t index, ConfChangeType type, std::uint64_t node) {
  return Entry{T(1), Idx(index), EntryType::kConfChange, EncodeConfChange(Change(type, node))};
}

std::string ContextOf(const ConfChange& change) {
  return "ctx-" + std::to_string(change.node.value());
}

TEST_CASE("forced changes: every other voter and learner removed, self kept",
          "[raft][force_new_cluster]") {
  using enum ConfChangeType;
  CHECK(ForcedConfChanges(Conf({1, 2, 3}), Id(2)) ==
        std::vector<ConfChange>{Change(kRemoveNode, 1), Change(kRemoveNode, 3)});
  CHECK(ForcedConfChanges(Conf({1, 2, 3}, {4}), Id(3)) ==
        std::vector<ConfChange>{Change(kRemoveNode, 1), Change(kRemoveNode, 2),
                                Change(kRemoveNode, 4)});
  // A learner promotes itself first: the removal of the last other voter must leave a voter.
  CHECK(ForcedConfChanges(Conf({1, 2}, {3}), Id(3)) ==
        std::vector<ConfChange>{Change(kPromoteLearner, 3), Change(kRemoveNode, 1),
                                Change(kRemoveNode, 2)});
  CHECK(ForcedConfChanges(Conf({1, 2}), Id(5)) == std::vector<ConfChange>{Change(kAddVoter, 5),
                                                                          Change(kRemoveNode, 1),
                                                                          Change(kRemoveNode, 2)});
  CHECK(ForcedConfChanges(Conf({2}), Id(2)).empty());
}

TEST_CASE("forced changes apply in order and leave self the only voter",
          "[raft][force_new_cluster]") {
  for (const auto& [conf, self] : std::vector<std::pair<ConfState, std::uint64_t>>{
           {Conf({1, 2, 3}), 2}, {Conf({1, 2}, {3}), 3}, {Conf({1, 2}, {3}), 1}, {Conf({4}), 9}}) {
    ConfState now = conf;
    for (const ConfChange& change : ForcedConfChanges(conf, Id(self))) {
      Result<ConfState> next = ApplyConfChange(now, change);
      INFO(next.status().ToString());
      REQUIRE(next.ok());
      now = *next;
    }
    CHECK(now == Conf({self}));
  }
}

TEST_CASE("conf change entries replay as the core applies them, invalid ones skipped",
          "[raft][force_new_cluster]") {
  using enum ConfChangeType;
  const std::vector<Entry> entries = {
      ConfEntry(2, kAddLearner, 4),
      Entry{T(1), Idx(3), EntryType::kNormal, "data"},
      ConfEntry(4, kRemoveNode, 9),  // not a member: skipped
      ConfEntry(5, kPromoteLearner, 4),
      ConfEntry(6, kRemoveNode, 1),
      Entry{T(1), Idx(7), EntryType::kConfChange, "garbage"},
  };
  CHECK(ApplyConfChangeEntries(Conf({1, 2, 3}), entries) == Conf({2, 3, 4}));
}

// Node 2 of a 3-voter cluster holds a, b committed and c that never committed (its ack was lost
// and node 3 never got it).
void CommitTwoLeaveOneUncommitted(TestCluster& c) {
  c.BootAndElect(1);
  REQUIRE(c.node(1).Propose({"a", "b"}).ok());
  c.Stabilize();
  c.Isolate(3);
  c.Cut(2, 1);
  REQUIRE(c.node(1).Propose({"c"}).ok());
  c.Stabilize();
  REQUIRE(c.log(2).LastIndex() > c.node(2).commit_index());
}

TEST_CASE("forced start: the uncommitted suffix is discarded, the removals follow the commit",
          "[raft][force_new_cluster]") {
  TestCluster c(3);
  CommitTwoLeaveOneUncommitted(c);
  const LogIndex commit = c.node(2).commit_index();
  const ForcedStart plan = PlanForcedStart(c.log(2), c.node(2).applied_index(), Id(2), ContextOf);
  CHECK(plan.commit == commit);
  CHECK(plan.discarded == c.log(2).LastIndex().value() - commit.value());
  CHECK(plan.conf == Conf({1, 2, 3}));
  REQUIRE(plan.entries.size() == 2);
  const std::vector<std::uint64_t> removed = {1, 3};
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    const Entry& e = plan.entries[i];
    CHECK(e.index == Idx(commit.value() + 1 + i));
    CHECK(e.term == c.log(2).InitialHardState().term);
    CHECK(e.type == EntryType::kConfChange);
    const std::optional<ConfChange> change = DecodeConfChange(e.data);
    REQUIRE(change);
    CHECK(change->type == ConfChangeType::kRemoveNode);
    CHECK(change->node == Id(removed[i]));
    CHECK(change->context == "ctx-" + std::to_string(removed[i]));
  }
  CHECK(plan.hard_state.commit == plan.entries.back().index);
  CHECK(plan.hard_state.term == c.log(2).InitialHardState().term);
}

TEST_CASE("forced start: the state machine's applied index counts as committed",
          "[raft][force_new_cluster]") {
  TestCluster c(3);
  CommitTwoLeaveOneUncommitted(c);
  // The persisted commit index lags (it is written lazily); what was applied was committed.
  HardState lagging = c.log(2).InitialHardState();
  lagging.commit = kBootstrapIndex;
  c.log(2).SetHardState(lagging);
  const LogIndex applied = c.node(2).applied_index();
  CHECK(PlanForcedStart(c.log(2), applied, Id(2), ContextOf).commit == applied);
  CHECK(PlanForcedStart(c.log(2), kBootstrapIndex, Id(2), ContextOf).commit == kBootstrapIndex);
}

TEST_CASE("forced start: the core elects itself alone, keeps the committed entries, serves",
          "[raft][force_new_cluster]") {
  TestCluster c(3);
  CommitTwoLeaveOneUncommitted(c);
  const ForcedStart plan = PlanForcedStart(c.log(2), c.node(2).applied_index(), Id(2), ContextOf);
  c.log(2).Append(plan.entries);
  c.log(2).SetHardState(plan.hard_state);
  c.Isolate(1);
  c.Isolate(3);
  c.Restart(2);
  c.Stabilize();
  CHECK(c.node(2).conf_state() == Conf({2}));
  for (int i = 0; i < 100 && c.node(2).role() != Role::kLeader; ++i) c.Run(1);
  REQUIRE(c.node(2).role() == Role::kLeader);
  REQUIRE(c.node(2).Propose({"d"}).ok());
  c.Stabilize();
  CHECK(AppliedData(c.at(2)) == std::vector<std::string>{"a", "b", "d"});

  // Restarted again, the configuration comes back from the log, and there is nothing to force.
  c.Restart(2);
  c.Stabilize();
  CHECK(c.node(2).conf_state() == Conf({2}));
  const ForcedStart again = PlanForcedStart(c.log(2), c.node(2).applied_index(), Id(2), ContextOf);
  CHECK(again.entries.empty());
  CHECK(again.discarded == 0);
  CHECK(again.conf == Conf({2}));
}

}  // namespace
}  // namespace epoch::raft::test
