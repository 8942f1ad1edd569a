// Membership changes one server at a time: learners that catch up before promotion, removal of
// followers and of the leader itself, and the guards around them.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

ConfChange Change(ConfChangeType type, std::uint64_t node) { return ConfChange{type, Id(node)}; }

// A 3-voter cluster led by 1 with node 4 added as a learner (and caught up).
void AddLearner4(TestCluster& c) {
  c.BootAndElect(1);
  c.AddEmptyNode(4);
  auto r = c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 4));
  REQUIRE(r.ok());
  c.Run(10);
}

TEST_CASE("add learner: it joins from the leader's snapshot, receives entries, never votes",
          "[raft][membership]") {
  TestCluster c(3);
  AddLearner4(c);
  for (std::uint64_t id = 1; id <= 4; ++id) {
    CAPTURE(id);
    CHECK(c.node(id).conf_state().learners == std::vector<NodeId>{Id(4)});
    CHECK(c.node(id).conf_state().voters.size() == 3);
  }
  CHECK(c.log(4).LastSnapshot().index == kBootstrapIndex);  // it started from a snapshot
  CHECK(c.node(4).IsLearner());
  REQUIRE(c.node(1).Propose({"for-all"}).ok());
  c.Run(3);
  CHECK(AppliedData(c.at(4)) == std::vector<std::string>{"for-all"});
  CHECK(c.at(4).last_conf_state.learners == std::vector<NodeId>{Id(4)});
  // A learner never campaigns, and its votes do not count.
  c.Isolate(1);
  for (int i = 0; i < 100; ++i) {
    c.Tick(4);
    c.Stabilize();
  }
  CHECK(c.node(4).role() == Role::kFollower);
  CHECK(c.CountSent(MessageType::kPreVote, 4) == 0);
}

TEST_CASE("promote learner: only once caught up, then it counts toward the quorum",
          "[raft][membership]") {
  TestCluster c(3);
  AddLearner4(c);
  c.Isolate(4);
  REQUIRE(c.node(1).Propose({"missed"}).ok());
  c.Stabilize();
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kPromoteLearner, 4)).error ==
        ProposeError::kLearnerNotCaughtUp);
  c.Heal();
  c.Run(4);
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kPromoteLearner, 4)).ok());
  c.Run(4);
  for (std::uint64_t id = 1; id <= 4; ++id) {
    CAPTURE(id);
    CHECK(c.node(id).conf_state().voters.size() == 4);
    CHECK(c.node(id).conf_state().learners.empty());
  }
  CHECK_FALSE(c.node(4).IsLearner());
  // With 4 voters, two of them are no longer a quorum.
  c.Isolate(3);
  c.Isolate(4);
  auto r = c.node(1).Propose({"needs-three"});
  REQUIRE(r.ok());
  c.Run(2);
  CHECK(c.node(1).commit_index() < r.last_index);
  c.Heal();
  c.Run(4);
  CHECK(c.node(1).commit_index() >= r.last_index);
}

TEST_CASE("add voter: it joins from a snapshot and counts toward the quorum at once",
          "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.AddEmptyNode(4);
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddVoter, 4)).ok());
  c.Run(10);
  for (std::uint64_t id = 1; id <= 4; ++id) {
    CAPTURE(id);
    CHECK(c.node(id).conf_state().voters.size() == 4);
    CHECK(c.node(id).conf_state().learners.empty());
  }
  CHECK(c.log(4).LastSnapshot().index == kBootstrapIndex);
  CHECK_FALSE(c.node(4).IsLearner());
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddVoter, 4)).error ==
        ProposeError::kInvalidConfChange);
  // Leader 1 with 4 alone is not a quorum of four; with 3 back it is.
  c.Isolate(2);
  c.Isolate(3);
  auto r = c.node(1).Propose({"needs-three"});
  REQUIRE(r.ok());
  c.Run(2);
  CHECK(c.node(1).commit_index() < r.last_index);
  c.Heal();
  c.Isolate(2);
  c.Run(4);
  CHECK(c.node(1).commit_index() >= r.last_index);
  CHECK(c.node(4).commit_index() >= r.last_index);
}

TEST_CASE("update node: the context travels with the entry, the configuration stays",
          "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  ConfChange update{ConfChangeType::kUpdateNode, Id(2), "new-peer-urls"};
  auto r = c.node(1).ProposeConfChange(update);
  REQUIRE(r.ok());
  c.Run(3);
  CHECK(c.node(1).conf_state().voters.size() == 3);
  bool seen = false;
  for (const Entry& e : c.at(3).applied) {
    if (e.index == r.last_index) seen = DecodeConfChange(e.data) == update;
  }
  CHECK(seen);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kUpdateNode, 9)).error ==
        ProposeError::kInvalidConfChange);
}

TEST_CASE("one change at a time, invalid changes refused", "[raft][membership]") {
  TestCluster c(3);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 4)).error ==
        ProposeError::kNotLeader);
  c.BootAndElect(1);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 2)).error ==
        ProposeError::kInvalidConfChange);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kPromoteLearner, 2)).error ==
        ProposeError::kInvalidConfChange);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 9)).error ==
        ProposeError::kInvalidConfChange);
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 4)).ok());
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 5)).error ==
        ProposeError::kConfChangePending);
  c.Stabilize();  // committed and applied
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 5)).ok());
}

TEST_CASE("a new leader accepts a conf change only after committing an entry of its term",
          "[raft][membership]") {
  TestCluster c(3);
  REQUIRE(c.PassBootWindow());
  c.node(1).Campaign();
  c.SetDropFilter([](const Message& m) { return m.type == MessageType::kAppendEntries; });
  c.Stabilize();
  REQUIRE(c.node(1).role() == Role::kLeader);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 3)).error ==
        ProposeError::kConfChangePending);
  c.SetDropFilter({});
  c.Run(3);
  CHECK(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 3)).ok());
}

TEST_CASE("remove a follower: the rest go on as a smaller cluster", "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 3)).ok());
  c.Run(3);
  CHECK(c.node(1).conf_state().voters == std::vector<NodeId>{Id(1), Id(2)});
  for (const PeerStatus& p : c.node(1).Status().progress) CHECK(p.id != Id(3));
  c.Isolate(3);
  auto r = c.node(1).Propose({"two-node"});
  REQUIRE(r.ok());
  c.Run(2);
  CHECK(c.node(1).commit_index() >= r.last_index);
  // The removed node never campaigns.
  for (int i = 0; i < 100; ++i) c.Tick(3);
  CHECK(c.node(3).role() == Role::kFollower);
}

TEST_CASE("remove the leader: it steps down once applied and hands over with TimeoutNow",
          "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(1).term();
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 1)).ok());
  c.Stabilize();
  CHECK(c.node(1).role() == Role::kFollower);
  CHECK(c.CountSent(MessageType::kTimeoutNow, 1) == 1);
  const NodeId next = c.Leader();
  REQUIRE(next != kNoNode);
  CHECK(next != Id(1));
  CHECK(c.node(next.value()).term() == term.Next());
  CHECK(c.node(next.value()).conf_state().voters.size() == 2);
  auto r = c.node(next.value()).Propose({"after-removal"});
  REQUIRE(r.ok());
  c.Run(3);
  CHECK(c.node(next.value()).commit_index() >= r.last_index);
  for (int i = 0; i < 100; ++i) c.Tick(1);
  CHECK(c.node(1).role() == Role::kFollower);
}

// Regression: the hand-over waited for a voter holding the leader's last entry, so under a write
// load (an entry newer than the removal always unacknowledged) it never happened and the cluster
// sat out an election timeout (integration "a learner joins ..., the leader leaves" flaked).
TEST_CASE("remove the leader: it hands over although its newest entry is not acknowledged",
          "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(1).term();
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 1)).ok());
  c.Process(1);
  c.DeliverQueued();  // the followers store the removal ...
  c.Process(2);
  c.Process(3);
  // ... and an entry after it is appended before their acknowledgements arrive: when the removal
  // is applied, no voter holds the leader's last entry.
  REQUIRE(c.node(1).Propose({"after-removal"}).ok());
  c.Stabilize();
  REQUIRE(c.CountSent(MessageType::kTimeoutNow, 1) == 1);
  CHECK(c.node(1).role() == Role::kFollower);
  const NodeId next = c.Leader();  // no tick passed
  REQUIRE(next != kNoNode);
  CHECK(next != Id(1));
  CHECK(c.node(next.value()).term() == term.Next());
}

TEST_CASE("remove the leader: a TimeoutNow that beats the removal's apply still hands over",
          "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(1).term();
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kRemoveNode, 1)).ok());
  // The followers store the entry and acknowledge it, then stop applying: the leader commits
  // and applies its removal, and its commit and TimeoutNow reach them before they apply.
  c.Process(1);
  c.DeliverQueued();
  c.Process(2);
  c.Process(3);
  c.DeliverQueued();
  c.Pause(2);
  c.Pause(3);
  c.Stabilize();
  REQUIRE(c.CountSent(MessageType::kTimeoutNow, 1) == 1);
  REQUIRE(c.node(1).role() == Role::kFollower);
  CHECK(c.node(2).term() == term);
  CHECK(c.node(3).term() == term);
  // Once they apply it, the target campaigns at once: no tick passes before a new leader.
  c.Resume(2);
  c.Resume(3);
  c.Stabilize();
  const NodeId next = c.Leader();
  REQUIRE(next != kNoNode);
  CHECK(next != Id(1));
  CHECK(c.node(next.value()).term() == term.Next());
}

TEST_CASE("no campaign while a committed conf change is not applied", "[raft][membership]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(1).ProposeConfChange(Change(ConfChangeType::kAddLearner, 4)).ok());
  c.Process(1);
  // Follower 2 receives the entry and learns it is committed, but does not apply it yet.
  c.Pause(2);
  c.Run(3);
  REQUIRE(c.node(2).commit_index() > c.node(2).applied_index());
  const Term term = c.node(2).term();
  c.node(2).Campaign();
  CHECK(c.node(2).role() == Role::kFollower);
  CHECK(c.node(2).term() == term);
  c.Resume(2);
  c.Stabilize();
  c.Isolate(1);
  c.Run(c.at(2).config.election_timeout_min_ticks);
  c.node(2).Campaign();
  CHECK(c.node(2).role() != Role::kFollower);
}

}  // namespace
}  // namespace epoch::raft::test
