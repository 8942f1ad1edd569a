// Replication mechanics: pipelining and the in-flight window, batching, fast conflict
// backtracking, snapshots, durability-stall step-down, restart replay.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

PeerStatus PeerOf(Node& leader, std::uint64_t id) {
  for (const PeerStatus& p : leader.Status().progress) {
    if (p.id == Id(id)) return p;
  }
  FAIL("no progress for peer " << id);
  return {};
}

std::size_t AppendsTo(const std::vector<Message>& sent, std::uint64_t to, bool with_entries) {
  std::size_t n = 0;
  for (const Message& m : sent) {
    if (m.type == MessageType::kAppendEntries && m.to == Id(to) &&
        (!with_entries || !m.entries.empty())) {
      ++n;
    }
  }
  return n;
}

TEST_CASE("in-flight window: bounded by message count, a slow follower does not slow commits",
          "[raft][flow]") {
  TestCluster c(3, [](Config& k) { k.max_inflight_msgs = 2; });
  c.BootAndElect(1);
  REQUIRE(PeerOf(c.node(1), 2).state == ProgressState::kReplicate);
  c.Cut(2, 1);  // node 2's answers are lost
  c.sent().clear();
  LogIndex last;
  for (int i = 0; i < 5; ++i) {
    auto r = c.node(1).Propose({"p" + std::to_string(i)});
    REQUIRE(r.ok());
    last = r.last_index;
    c.Stabilize();
  }
  CHECK(AppendsTo(c.sent(), 2, true) == 2);
  CHECK(PeerOf(c.node(1), 2).inflight_msgs == 2);
  CHECK(AppendsTo(c.sent(), 3, true) == 5);
  CHECK(c.node(1).commit_index() == last);  // committed with node 3
  c.Heal();
  c.Run(6);
  CHECK(c.log(2).LastIndex() == last);
}

TEST_CASE("in-flight window: bounded by bytes", "[raft][flow]") {
  TestCluster c(3, [](Config& k) {
    k.max_inflight_bytes = 100;
    k.max_msg_bytes = 100;
  });
  c.BootAndElect(1);
  c.Cut(2, 1);
  c.sent().clear();
  for (int i = 0; i < 3; ++i) {
    REQUIRE(c.node(1).Propose({std::string(100, 'x')}).ok());
    c.Stabilize();
  }
  CHECK(AppendsTo(c.sent(), 2, true) == 1);
  CHECK(PeerOf(c.node(1), 2).inflight_bytes == 100);
}

TEST_CASE("batching: many entries per message, split by max_msg_bytes and pipelined",
          "[raft][flow]") {
  TestCluster c(3, [](Config& k) { k.max_msg_bytes = 25; });
  c.BootAndElect(1);
  c.Cut(2, 1);
  c.sent().clear();
  std::vector<std::string> batch(10, std::string(10, 'y'));
  REQUIRE(c.node(1).Propose(batch).ok());
  c.Process(1);
  std::vector<Message> to2;
  for (const Message& m : c.queue()) {
    if (m.type == MessageType::kAppendEntries && m.to == Id(2)) to2.push_back(m);
  }
  REQUIRE(to2.size() == 5);  // 2 entries (20 bytes) per message, all in flight at once
  for (const Message& m : to2) CHECK(m.entries.size() == 2);
  CHECK(to2[1].index == to2[0].entries.back().index);  // each continues the previous one
}

TEST_CASE("fast backtracking: a divergent follower is repaired in one rejection",
          "[raft][conflict]") {
  std::vector<int> leader_terms(50, 3);
  std::vector<int> follower_terms(100, 2);
  TestCluster c(3, [](Config& k) { k.pre_vote = false; });
  c.SetLog(1, EntriesWithTerms(2, leader_terms), HardState{T(3), kNoNode, Idx(1)});
  c.SetLog(2, EntriesWithTerms(2, follower_terms), HardState{T(3), kNoNode, Idx(1)});
  c.SetLog(3, {}, HardState{T(3), kNoNode, Idx(1)});
  REQUIRE(c.PassBootWindow());
  c.Elect(1);
  REQUIRE(c.node(1).role() == Role::kLeader);
  c.Stabilize();
  std::size_t rejects = 0;
  for (const Message& m : c.sent()) {
    if (m.type == MessageType::kAppendEntriesResponse && m.from == Id(2) && m.reject) {
      ++rejects;
      CHECK(m.reject_hint == Idx(51));  // its entry 51 has term 2 <= the leader's prev term
      CHECK(m.log_term == T(2));
    }
  }
  CHECK(rejects == 1);  // one entry at a time would take 50
  CHECK(c.log(2).LastIndex() == c.log(1).LastIndex());
  CHECK(c.log(2).TermAt(Idx(100)) == std::nullopt);
  CHECK(c.log(2).TermAt(Idx(51)) == T(3));
}

TEST_CASE("fast backtracking: a follower far behind answers with its last index",
          "[raft][conflict]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Isolate(3);
  for (int i = 0; i < 30; ++i) REQUIRE(c.node(1).Propose({"e" + std::to_string(i)}).ok());
  c.Stabilize();
  c.Heal();
  c.sent().clear();
  c.Run(4);
  std::size_t rejects = 0;
  for (const Message& m : c.sent()) {
    if (m.type == MessageType::kAppendEntriesResponse && m.from == Id(3) && m.reject) ++rejects;
  }
  CHECK(rejects <= 1);
  CHECK(c.log(3).LastIndex() == c.log(1).LastIndex());
}

TEST_CASE("snapshots: a follower that needs compacted entries gets an InstallSnapshot",
          "[raft][snapshot]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Isolate(3);
  for (int i = 0; i < 10; ++i) REQUIRE(c.node(1).Propose({"s" + std::to_string(i)}).ok());
  c.Stabilize();
  // The leader's state machine took a snapshot at its applied index; the log is compacted.
  const LogIndex applied = c.node(1).applied_index();
  c.log(1).Compact(applied, c.node(1).conf_state());
  REQUIRE(c.log(1).FirstIndex() == applied.Next());
  c.Heal();
  c.sent().clear();
  // Hold the snapshot until we looked at the leader's state.
  c.SetDropFilter([](const Message& m) { return m.type == MessageType::kInstallSnapshot; });
  c.Run(4);
  auto snaps = OfType(c.sent(), MessageType::kInstallSnapshot);
  REQUIRE(!snaps.empty());
  REQUIRE(snaps[0].snapshot.has_value());
  CHECK(snaps[0].snapshot->index == applied);
  CHECK(PeerOf(c.node(1), 3).state == ProgressState::kSnapshot);
  CHECK(PeerOf(c.node(1), 3).pending_snapshot == applied);
  // The transfer failed: the driver reports it, the leader probes and sends the snapshot again.
  c.node(1).ReportSnapshot(Id(3), false);
  CHECK(PeerOf(c.node(1), 3).state == ProgressState::kProbe);
  c.SetDropFilter({});
  c.sent().clear();
  c.Run(4);
  CHECK(c.CountSent(MessageType::kInstallSnapshot) >= 1);
  CHECK(c.log(3).LastSnapshot().index == applied);
  CHECK(c.node(3).applied_index() >= applied);
  CHECK(PeerOf(c.node(1), 3).state == ProgressState::kReplicate);
  REQUIRE(c.node(1).Propose({"after"}).ok());
  c.Stabilize();
  CHECK(AppliedData(c.at(3)) == std::vector<std::string>{"after"});
  CHECK(c.log(3).LastIndex() == c.log(1).LastIndex());
}

TEST_CASE("snapshots: the follower's Ready carries the snapshot, before entries that follow it",
          "[raft][snapshot]") {
  TestCluster c(3);
  c.BootAndElect(1);
  Message m = Msg(MessageType::kInstallSnapshot, 1, 3, c.node(1).term().value());
  SnapshotMeta meta{Idx(20), c.node(1).term(), c.node(1).conf_state()};
  m.snapshot = meta;
  m.index = meta.index;
  m.log_term = meta.term;
  REQUIRE(c.node(3).Step(m) == StepResult::kOk);
  CHECK(c.node(3).commit_index() == Idx(20));
  CHECK(c.node(3).last_index() == Idx(20));
  Ready rd = c.node(3).GetReady();
  REQUIRE(rd.snapshot);
  CHECK(*rd.snapshot == meta);
  CHECK(rd.must_sync);
  CHECK(rd.committed_entries.empty());
  auto resp = OfType(rd.messages_after_persist, MessageType::kAppendEntriesResponse);
  REQUIRE(resp.size() == 1);
  CHECK(resp[0].index == Idx(20));
  c.log(3).ApplySnapshot(*rd.snapshot);
  c.node(3).Advance(rd);
  CHECK(c.node(3).applied_index() == Idx(20));
  // An older snapshot changes nothing.
  m.snapshot->index = Idx(10);
  c.node(3).Step(m);
  rd = c.node(3).GetReady();
  CHECK_FALSE(rd.snapshot);
  c.node(3).Advance(rd);
}

// Node 1 is elected and proposes one entry; its driver sends the append to the followers but its
// fsync does not complete: the Ready is returned, neither persisted nor advanced.
Ready LeaderSendsWithoutFsync(TestCluster& c) {
  c.BootAndElect(1);
  REQUIRE(c.node(1).Propose({"x"}).ok());
  Ready rd = c.node(1).GetReady();
  for (Message& m : rd.messages) c.queue().push_back(m);
  c.DeliverQueued();
  return rd;
}

TEST_CASE("durability stall: a leader whose own disk does not progress steps down",
          "[raft][durability]") {
  // check_quorum off: with it, the silence of a stalled leader (its Ready is never advanced, so
  // nothing more is sent) would depose it after one floor anyway.
  for (bool stalled : {true, false}) {
    CAPTURE(stalled);
    TestCluster c(3, [](Config& k) { k.check_quorum = false; });
    Node& leader = c.node(1);
    const int bound = static_cast<int>(c.at(1).config.durability_stall_ticks);
    Ready rd = LeaderSendsWithoutFsync(c);
    c.ProcessAll();  // followers persist and answer
    for (Message& m : c.queue()) leader.Step(m);
    c.queue().clear();
    CHECK(leader.commit_index() == rd.entries.back().index);  // the followers are a majority
    if (!stalled) {
      c.log(1).Append(rd.entries);
      leader.Advance(rd);
    }
    for (int i = 0; i < bound - 1; ++i) {
      leader.Tick();
      if (!stalled) c.Stabilize();
    }
    CHECK(leader.role() == Role::kLeader);
    leader.Tick();
    CHECK((leader.role() == Role::kLeader) == !stalled);
  }
}

TEST_CASE("durability stall: with every disk stalled the leader keeps leading",
          "[raft][durability]") {
  TestCluster c(3, [](Config& k) { k.check_quorum = false; });
  Node& leader = c.node(1);
  const int bound = static_cast<int>(c.at(1).config.durability_stall_ticks);
  // Nor do the followers' fsyncs complete (one saturated disk): they are never processed.
  (void)LeaderSendsWithoutFsync(c);
  for (int i = 0; i < 2 * bound; ++i) leader.Tick();
  CHECK(leader.role() == Role::kLeader);  // nobody is healthier: an election would wait too
  // One follower's disk completes: it acknowledges what the leader could not make durable.
  c.Process(2);
  for (Message& m : c.queue()) {
    if (m.to == NodeId(1)) leader.Step(m);
  }
  c.queue().clear();
  leader.Tick();
  CHECK(leader.role() == Role::kFollower);
}

TEST_CASE("unreachable peer: replication falls back to probing", "[raft][flow]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(PeerOf(c.node(1), 2).state == ProgressState::kReplicate);
  c.node(1).ReportUnreachable(Id(2));
  CHECK(PeerOf(c.node(1), 2).state == ProgressState::kProbe);
  c.Run(4);
  CHECK(PeerOf(c.node(1), 2).state == ProgressState::kReplicate);
}

TEST_CASE("restart: committed entries after the snapshot are handed out again", "[raft][restart]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(1).Propose({"a", "b"}).ok());
  c.Stabilize();
  c.Run(3);  // followers learn the commit index
  const LogIndex commit = c.node(2).commit_index();
  c.Restart(2);
  CHECK(c.node(2).commit_index() == commit);
  CHECK(c.node(2).applied_index() == kBootstrapIndex);
  c.Process(2);
  CHECK(AppliedData(c.at(2)) == std::vector<std::string>{"a", "b"});
  CHECK(c.node(2).applied_index() == commit);
}

TEST_CASE("restart: a hard-state commit beyond the persisted log is clamped", "[raft][restart]") {
  MemoryLog log = MemoryLog::Bootstrapped({Id(1), Id(2), Id(3)});
  log.Append(EntriesWithTerms(2, {1, 1}));
  log.SetHardState(HardState{T(1), kNoNode, Idx(9)});
  Node n(TestConfig(1), log, 1);
  CHECK(n.commit_index() == Idx(3));
}

TEST_CASE("a Ready outstanding while the node keeps stepping and ticking", "[raft][ready]") {
  // The server persists asynchronously: Tick/Step/Propose happen between GetReady and Advance.
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  REQUIRE(leader.Propose({"one"}).ok());
  Ready first = leader.GetReady();
  REQUIRE(first.entries.size() == 1);
  REQUIRE(leader.Propose({"two"}).ok());
  leader.Tick();
  CHECK(leader.HasReady());
  c.log(1).Append(first.entries);
  leader.Advance(first);
  Ready second = leader.GetReady();
  REQUIRE(second.entries.size() == 1);  // only what was not handed out before
  CHECK(second.entries[0].data == "two");
  CHECK(second.sequence == first.sequence + 1);
  c.log(1).Append(second.entries);
  leader.Advance(second);
}

}  // namespace
}  // namespace epoch::raft::test
