// Ready::durable_committed: which committed entries the driver may apply while the Ready's own
// write is in flight (ready.h). Too high a count lets a crash leave the state machine ahead of
// the log it replays; too low a count only costs latency, so both directions are checked.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

// An AppendEntries from leader 2 in term 2 after (prev_index, prev_term), with leader commit.
Message AppendFrom2(std::uint64_t prev_index, std::uint64_t prev_term, std::vector<Entry> entries,
                    std::uint64_t commit) {
  Message m = Msg(MessageType::kAppendEntries, 2, 3, 2);
  m.index = Idx(prev_index);
  m.log_term = T(prev_term);
  m.entries = std::move(entries);
  m.commit = Idx(commit);
  return m;
}

// Node 3, with entries 2.. of `disk_terms` on disk (commit 1), steps `m`: the Ready it hands out.
Ready FollowerReady(TestCluster& c, const std::vector<int>& disk_terms, const Message& m) {
  c.SetLog(3, EntriesWithTerms(2, disk_terms), HardState{T(1), kNoNode, Idx(1)});
  REQUIRE(c.node(3).Step(m) == StepResult::kOk);
  return c.node(3).GetReady();
}

TEST_CASE("durable committed: the leader applies what its last write made durable",
          "[raft][ready]") {
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  REQUIRE(leader.Propose({"a"}).ok());
  Ready first = leader.GetReady();
  REQUIRE(first.entries.size() == 1);
  // The followers persist and acknowledge while the leader's own write is still in flight.
  for (Message& m : first.messages) c.queue().push_back(m);
  c.DeliverQueued();
  c.ProcessAll();
  for (Message& m : c.queue()) leader.Step(m);
  c.queue().clear();
  REQUIRE(leader.commit_index() == first.entries.back().index);
  REQUIRE(leader.Propose({"b"}).ok());
  c.log(1).Append(first.entries);
  leader.Advance(first);
  Ready second = leader.GetReady();
  REQUIRE(second.entries.size() == 1);
  CHECK(second.entries[0].data == "b");
  REQUIRE(second.committed_entries.size() == 1);
  CHECK(second.committed_entries[0].data == "a");
  // "a" was persisted by the first Ready: it need not wait for the write of "b".
  CHECK(second.durable_committed == 1);
  c.log(1).Append(second.entries);
  leader.Advance(second);
}

TEST_CASE("durable committed: entries committed in the Ready that carries them wait for it",
          "[raft][ready]") {
  TestCluster c(3);
  // Entries 2..3 are on disk; 4..5 arrive with a commit index that covers all four.
  Ready rd = FollowerReady(c, {1, 1}, AppendFrom2(3, 1, EntriesWithTerms(4, {2, 2}), 5));
  REQUIRE(rd.entries.size() == 2);
  REQUIRE(rd.committed_entries.size() == 4);
  CHECK(rd.committed_entries.front().index == Idx(2));
  CHECK(rd.durable_committed == 2);
  c.log(3).Append(rd.entries);
  c.node(3).Advance(rd);
}

TEST_CASE("durable committed: a conflicting append makes the replaced entries not durable",
          "[raft][ready]") {
  TestCluster c(3);
  // Entries 2..5 of term 1 are on disk; the new leader's log differs from index 4 on.
  Ready rd = FollowerReady(c, {1, 1, 1, 1}, AppendFrom2(3, 1, EntriesWithTerms(4, {2, 2}), 5));
  REQUIRE(rd.entries.size() == 2);
  CHECK(rd.entries.front().index == Idx(4));
  REQUIRE(rd.committed_entries.size() == 4);
  CHECK(rd.committed_entries[2].term == T(2));
  // 4 and 5 are on disk with term 1: the committed ones (term 2) are durable only after this write.
  CHECK(rd.durable_committed == 2);
  c.log(3).Append(rd.entries);
  c.node(3).Advance(rd);
}

TEST_CASE("durable committed: a commit-only append makes every committed entry durable",
          "[raft][ready]") {
  TestCluster c(3);
  Ready rd = FollowerReady(c, {1, 1, 1}, AppendFrom2(4, 1, {}, 4));
  CHECK(rd.entries.empty());
  REQUIRE(rd.committed_entries.size() == 3);
  CHECK(rd.durable_committed == 3);
  c.node(3).Advance(rd);
}

TEST_CASE("durable committed: nothing is applied early around a received snapshot",
          "[raft][ready]") {
  TestCluster c(3);
  Message m = Msg(MessageType::kInstallSnapshot, 2, 3, 2);
  m.snapshot = SnapshotMeta{Idx(20), T(2), c.node(3).conf_state()};
  m.index = Idx(20);
  m.log_term = T(2);
  Ready rd = FollowerReady(c, {1, 1}, m);
  REQUIRE(rd.snapshot);
  CHECK(rd.durable_committed == 0);
  c.log(3).ApplySnapshot(*rd.snapshot);
  c.node(3).Advance(rd);
}

}  // namespace
}  // namespace epoch::raft::test
