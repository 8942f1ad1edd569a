// One test per rule of the Raft paper's §5 (Ongaro & Ousterhout, "In Search of an Understandable
// Consensus Algorithm", 2014), in the spirit of etcd raft's raft_paper_test.go. Each names the
// section and the sentence it checks. Paper indexes are shifted by one: our logs start after the
// bootstrap snapshot at index 1.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

void NoPreVote(Config& c) { c.pre_vote = false; }

TEST_CASE(
    "5.1: a server seeing a larger term adopts it, and candidates and leaders revert to "
    "follower",
    "[raft][paper]") {
  for (Role role : {Role::kFollower, Role::kPreCandidate, Role::kCandidate, Role::kLeader}) {
    CAPTURE(RoleName(role));
    TestCluster c(3, role == Role::kPreCandidate ? TestCluster::ConfigTweak{} : NoPreVote);
    REQUIRE(c.PassBootWindow());
    if (role == Role::kLeader) c.Elect(1);
    if (role == Role::kCandidate || role == Role::kPreCandidate) c.node(1).Campaign();
    REQUIRE(c.node(1).role() == role);
    const Term higher = c.node(1).term().Next().Next();
    Message m = Msg(MessageType::kHeartbeat, 2, 1, higher.value());
    CHECK(c.node(1).Step(m) == StepResult::kOk);
    CHECK(c.node(1).term() == higher);
    CHECK(c.node(1).role() == Role::kFollower);
    CHECK(c.node(1).leader() == Id(2));
  }
}

TEST_CASE("5.1: a request with a stale term is rejected and answered with the current term",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  REQUIRE(c.PassBootWindow());
  c.Elect(2);  // everyone at term 2
  REQUIRE(c.node(1).term() == T(2));
  const LogIndex last = c.node(1).last_index();
  Message m = Msg(MessageType::kAppendEntries, 3, 1, 1);
  m.index = kBootstrapIndex;
  m.log_term = T(1);
  m.entries = EntriesWithTerms(2, {1});
  CHECK(c.node(1).Step(m) == StepResult::kStaleTerm);
  CHECK(c.node(1).last_index() == last);
  Ready rd = c.node(1).GetReady();
  auto resp = OfType(rd.messages_after_persist, MessageType::kAppendEntriesResponse);
  REQUIRE(resp.size() == 1);
  CHECK(resp[0].term == T(2));  // tells the stale leader to step down
  c.node(1).Advance(rd);
}

TEST_CASE("5.2: servers start up as followers", "[raft][paper]") {
  TestCluster c(3);
  for (NodeId id : c.ids()) {
    CHECK(c.node(id.value()).role() == Role::kFollower);
    CHECK(c.node(id.value()).term() == kBootstrapTerm);
    CHECK(c.node(id.value()).leader() == kNoNode);
  }
}

TEST_CASE("5.2: the leader sends periodic heartbeats to all followers", "[raft][paper]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(1).role() == Role::kLeader);
  c.sent().clear();
  const int hb = c.at(1).config.heartbeat_ticks;
  c.Tick(1, hb - 1);
  c.Process(1);
  CHECK(c.CountSent(MessageType::kHeartbeat) == 0);
  c.Tick(1);
  c.Process(1);
  auto beats = OfType(c.sent(), MessageType::kHeartbeat);
  REQUIRE(beats.size() == 2);
  CHECK(beats[0].to != beats[1].to);
  for (const Message& m : beats) CHECK(m.term == c.node(1).term());
}

TEST_CASE("5.2: a follower that hears nothing for an election timeout starts an election",
          "[raft][paper]") {
  SECTION("without pre-vote: increments its term, votes for itself, asks every voter") {
    TestCluster c(3, NoPreVote);
    Node& n = c.node(1);
    const std::int64_t timeout = n.election_timeout_ticks();
    c.Tick(1, static_cast<int>(timeout) - 1);
    CHECK(n.role() == Role::kFollower);
    c.Tick(1);
    CHECK(n.role() == Role::kCandidate);
    CHECK(n.term() == T(2));
    Ready rd = n.GetReady();
    REQUIRE(rd.hard_state);
    CHECK(rd.hard_state->vote == Id(1));
    CHECK(rd.must_sync);
    auto asks = OfType(rd.messages_after_persist, MessageType::kRequestVote);
    CHECK(asks.size() == 2);
    CHECK(OfType(rd.messages, MessageType::kRequestVote).empty());  // only once durable
    n.Advance(rd);
  }
  SECTION("with pre-vote (default): asks first, at term + 1, without changing its own term") {
    TestCluster c(3);
    Node& n = c.node(1);
    c.Tick(1, static_cast<int>(n.election_timeout_ticks()));
    CHECK(n.role() == Role::kPreCandidate);
    CHECK(n.term() == T(1));
    Ready rd = n.GetReady();
    auto asks = OfType(rd.messages, MessageType::kPreVote);
    REQUIRE(asks.size() == 2);
    CHECK(asks[0].term == T(2));
    CHECK((!rd.hard_state || rd.hard_state->vote == kNoNode));
    n.Advance(rd);
  }
}

TEST_CASE("5.2: a candidate wins an election with votes from a majority of the servers",
          "[raft][paper]") {
  struct Case {
    std::size_t size;
    std::vector<std::uint64_t> grants;
    std::vector<std::uint64_t> rejects;
    Role expected;
  };
  const std::vector<Case> cases = {
      {1, {}, {}, Role::kLeader},         {3, {}, {}, Role::kCandidate},
      {3, {2}, {}, Role::kLeader},        {3, {}, {2, 3}, Role::kFollower},
      {5, {2}, {}, Role::kCandidate},     {5, {2, 3}, {}, Role::kLeader},
      {5, {2}, {3, 4}, Role::kCandidate}, {5, {}, {2, 3, 4}, Role::kFollower},
  };
  for (const Case& k : cases) {
    CAPTURE(k.size, k.grants, k.rejects);
    TestCluster c(k.size, NoPreVote);
    c.node(1).Campaign();
    c.Process(1);
    for (std::uint64_t from : k.grants) {
      Message m = Msg(MessageType::kRequestVoteResponse, from, 1, 2);
      c.node(1).Step(m);
    }
    for (std::uint64_t from : k.rejects) {
      Message m = Msg(MessageType::kRequestVoteResponse, from, 1, 2);
      m.reject = true;
      c.node(1).Step(m);
    }
    CHECK(c.node(1).role() == k.expected);
  }
}

TEST_CASE("5.2: each server votes for at most one candidate per term, first come first served",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  REQUIRE(c.PassBootWindow());
  Node& n = c.node(1);
  auto ask = [&](std::uint64_t from) {
    Message m = Msg(MessageType::kRequestVote, from, 1, 2);
    m.index = n.last_index();
    m.log_term = T(1);
    REQUIRE(n.Step(m) == StepResult::kOk);
    Ready rd = n.GetReady();
    auto resp = OfType(rd.messages_after_persist, MessageType::kRequestVoteResponse);
    REQUIRE(resp.size() == 1);
    n.Advance(rd);
    return !resp[0].reject;
  };
  CHECK(ask(2));
  CHECK_FALSE(ask(3));
  CHECK(ask(2));  // a retransmitted request from the same candidate gets the same answer
  CHECK(n.Status().vote == Id(2));
}

TEST_CASE("5.2: a candidate that receives AppendEntries from a leader of its term steps down",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  c.node(1).Campaign();
  REQUIRE(c.node(1).role() == Role::kCandidate);
  Message m = Msg(MessageType::kAppendEntries, 2, 1, c.node(1).term().value());
  m.index = c.node(1).last_index();
  m.log_term = T(1);
  CHECK(c.node(1).Step(m) == StepResult::kOk);
  CHECK(c.node(1).role() == Role::kFollower);
  CHECK(c.node(1).leader() == Id(2));
  CHECK(c.node(1).term() == T(2));
}

TEST_CASE("5.2: election timeouts are chosen randomly from T .. T + jitter", "[raft][paper]") {
  std::set<std::int64_t> seen;
  MemoryLog log = MemoryLog::Bootstrapped({Id(1), Id(2), Id(3)});
  Config config = TestConfig(1);
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    Node n(config, log, seed);
    const std::int64_t t = n.election_timeout_ticks();
    CHECK(t >= config.election_timeout_min_ticks);
    CHECK(t < config.election_timeout_min_ticks + config.election_jitter_ticks);
    seen.insert(t);
  }
  CHECK(seen.size() == static_cast<std::size_t>(config.election_jitter_ticks));
}

TEST_CASE(
    "5.3: the leader appends a command, replicates it, and counts itself toward the "
    "majority only once its own copy is durable",
    "[raft][paper]") {
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  const LogIndex commit_before = leader.commit_index();
  auto r = leader.Propose({"x"});
  REQUIRE(r.ok());
  Ready rd = leader.GetReady();
  REQUIRE(rd.entries.size() == 1);
  CHECK(rd.entries[0].data == "x");
  // AppendEntries go out before the leader's own append is durable.
  auto appends = OfType(rd.messages, MessageType::kAppendEntries);
  REQUIRE(appends.size() == 2);
  // Follower 2 persists and acknowledges; follower 3 is slow.
  c.log(1).Append(rd.entries);  // the leader's disk write is in progress, not yet reported
  for (const Message& m : appends) {
    if (m.to == Id(2)) c.node(2).Step(m);
  }
  c.Process(2);
  for (const Message& m : c.queue()) {
    if (m.to == Id(1)) leader.Step(m);
  }
  c.queue().clear();
  CHECK(leader.commit_index() == commit_before);  // only follower 2 is durable
  leader.Advance(rd);                             // now the leader's copy is durable too
  CHECK(leader.commit_index() == r.last_index);
}

TEST_CASE("5.3: a follower learns the commit index, bounded by the last entry it received",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  REQUIRE(c.PassBootWindow());
  Node& f = c.node(1);
  Message m = Msg(MessageType::kAppendEntries, 2, 1, 2);
  m.index = Idx(1);
  m.log_term = T(1);
  m.entries = EntriesWithTerms(2, {2, 2});
  m.commit = Idx(5);  // the leader committed more than it sent us
  REQUIRE(f.Step(m) == StepResult::kOk);
  CHECK(f.commit_index() == Idx(3));
  c.Process(1);
  CHECK(AppliedData(c.at(1)) == std::vector<std::string>{"i2", "i3"});
}

TEST_CASE("5.3: a follower refuses AppendEntries whose previous entry it does not have",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  c.SetLog(1, EntriesWithTerms(2, {1, 2}), HardState{T(2), kNoNode, Idx(1)});
  Node& f = c.node(1);
  for (auto [prev_index, prev_term] : {std::pair{3, 3}, std::pair{5, 2}}) {
    CAPTURE(prev_index, prev_term);
    Message m = Msg(MessageType::kAppendEntries, 2, 1, 3);
    m.index = Idx(prev_index);
    m.log_term = T(prev_term);
    m.entries = EntriesWithTerms(prev_index + 1, {3});
    f.Step(m);
    Ready rd = f.GetReady();
    auto resp = OfType(rd.messages_after_persist, MessageType::kAppendEntriesResponse);
    REQUIRE(resp.size() == 1);
    CHECK(resp[0].reject);
    CHECK(resp[0].index == Idx(prev_index));
    CHECK(rd.entries.empty());
    f.Advance(rd);
    CHECK(f.last_index() == Idx(3));
  }
}

TEST_CASE("5.3: a follower deletes a conflicting entry and all that follow it, then appends",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  c.SetLog(1, EntriesWithTerms(2, {1, 2, 2}), HardState{T(2), kNoNode, Idx(2)});
  Node& f = c.node(1);
  Message m = Msg(MessageType::kAppendEntries, 2, 1, 3);
  m.index = Idx(2);
  m.log_term = T(1);
  m.entries = EntriesWithTerms(3, {3});
  m.entries[0].data = "new";
  REQUIRE(f.Step(m) == StepResult::kOk);
  c.Process(1);
  CHECK(c.log(1).LastIndex() == Idx(3));
  CHECK(c.log(1).TermAt(Idx(3)) == T(3));
  CHECK(c.log(1).Entries(Idx(3), Idx(4), 1000)[0].data == "new");
}

TEST_CASE("5.3: the leader forces followers' logs to duplicate its own (Figure 7)",
          "[raft][paper]") {
  // Figure 7: the leader of term 8 and followers (a)-(f). Paper index i is our index i + 1.
  const std::vector<std::vector<int>> logs = {
      {1, 1, 1, 4, 4, 5, 5, 6, 6, 6},        // leader
      {1, 1, 1, 4, 4, 5, 5, 6, 6},           // (a) missing one entry
      {1, 1, 1, 4},                          // (b) missing many
      {1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6},     // (c) one extra uncommitted entry
      {1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7},  // (d) extra entries of term 7
      {1, 1, 1, 4, 4, 4, 4},                 // (e) extra entries of term 4
      {1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3},     // (f) entries of terms 2 and 3 nobody else has
  };
  TestCluster c(7, NoPreVote);
  for (std::size_t i = 0; i < logs.size(); ++i) {
    c.SetLog(i + 1, EntriesWithTerms(2, logs[i]), HardState{T(7), kNoNode, Idx(1)});
  }
  REQUIRE(c.PassBootWindow());
  c.Elect(1);  // a, b, e, f grant their votes (5 of 7); c and d refuse (§5.4.1)
  REQUIRE(c.node(1).role() == Role::kLeader);
  c.Stabilize();
  const MemoryLog& leader_log = c.log(1);
  for (std::uint64_t id = 2; id <= 7; ++id) {
    CAPTURE(id);
    const MemoryLog& log = c.log(id);
    REQUIRE(log.LastIndex() == leader_log.LastIndex());
    for (LogIndex i = Idx(2); i <= log.LastIndex(); ++i)
      CHECK(log.TermAt(i) == leader_log.TermAt(i));
    CHECK(c.node(id).commit_index() == leader_log.LastIndex());
  }
}

TEST_CASE(
    "5.4.1: a voter denies its vote if its own log is more up-to-date than the "
    "candidate's",
    "[raft][paper]") {
  // Voter's log: terms {1, 2, 2} at indexes 2..4, so its last entry is (4, t2).
  struct Case {
    std::uint64_t last_index;
    std::uint64_t last_term;
    bool granted;
  };
  const std::vector<Case> cases = {
      {4, 1, false},  // lower last term
      {3, 2, false},  // same term, shorter
      {4, 2, true},   // same term, same length
      {5, 2, true},   // same term, longer
      {2, 3, true},   // higher last term, shorter
  };
  for (const Case& k : cases) {
    CAPTURE(k.last_index, k.last_term);
    TestCluster c(3, NoPreVote);
    c.SetLog(1, EntriesWithTerms(2, {1, 2, 2}), HardState{T(2), kNoNode, Idx(1)});
    REQUIRE(c.PassBootWindow());
    Message m = Msg(MessageType::kRequestVote, 2, 1, 3);
    m.index = Idx(k.last_index);
    m.log_term = T(k.last_term);
    REQUIRE(c.node(1).Step(m) == StepResult::kOk);
    Ready rd = c.node(1).GetReady();
    auto resp = OfType(rd.messages_after_persist, MessageType::kRequestVoteResponse);
    REQUIRE(resp.size() == 1);
    CHECK(resp[0].reject == !k.granted);
    c.node(1).Advance(rd);
  }
}

TEST_CASE(
    "5.4.2: a leader never commits an entry from a previous term by counting replicas "
    "(Figure 8)",
    "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  c.SetLog(1, EntriesWithTerms(2, {2}), HardState{T(2), kNoNode, Idx(1)});
  c.SetLog(2, EntriesWithTerms(2, {2}), HardState{T(2), kNoNode, Idx(1)});
  c.SetLog(3, {}, HardState{T(2), kNoNode, Idx(1)});
  REQUIRE(c.PassBootWindow());
  c.node(1).Campaign();
  // Only votes reach the candidate; nothing else is delivered yet.
  c.SetDropFilter([](const Message& m) {
    return m.type != MessageType::kRequestVote && m.type != MessageType::kRequestVoteResponse;
  });
  c.Stabilize();
  REQUIRE(c.node(1).role() == Role::kLeader);
  REQUIRE(c.node(1).term() == T(3));
  // Follower 2 reports that it stores index 2 (of term 2): a majority (1 and 2) holds it.
  Message ack = Msg(MessageType::kAppendEntriesResponse, 2, 1, 3);
  ack.index = Idx(2);
  c.node(1).Step(ack);
  CHECK(c.node(1).commit_index() == Idx(1));  // not committed by counting
  // Once the no-op of term 3 is replicated, index 2 commits with it.
  c.SetDropFilter({});
  c.Run(5);
  CHECK(c.node(1).commit_index() == Idx(3));
  CHECK(c.log(3).TermAt(Idx(2)) == T(2));
}

TEST_CASE("5.4.2/8: a new leader commits a no-op entry of its own term", "[raft][paper]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const LogIndex last = c.node(1).last_index();
  REQUIRE(last == Idx(2));
  CHECK(c.log(1).TermAt(last) == c.node(1).term());
  CHECK(c.log(1).Entries(last, last.Next(), 100)[0].data.empty());
  for (std::uint64_t id = 1; id <= 3; ++id) CHECK(c.node(id).commit_index() == last);
}

TEST_CASE("5.5: the leader retries AppendEntries to a follower that did not answer",
          "[raft][paper]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Isolate(3);
  REQUIRE(c.node(1).Propose({"a"}).ok());
  c.Stabilize();
  CHECK(AppliedData(c.at(3)).empty());
  c.Heal();
  c.Run(2 * c.at(1).config.heartbeat_ticks);
  CHECK(AppliedData(c.at(3)) == std::vector<std::string>{"a"});
}

TEST_CASE("Fig. 2: votes and acknowledgements leave only after the state they promise is durable",
          "[raft][paper]") {
  TestCluster c(3, NoPreVote);
  REQUIRE(c.PassBootWindow());
  Message vote = Msg(MessageType::kRequestVote, 2, 1, 2);
  vote.index = Idx(1);
  vote.log_term = T(1);
  c.node(1).Step(vote);
  Ready rd = c.node(1).GetReady();
  REQUIRE(rd.hard_state);
  CHECK(rd.hard_state->vote == Id(2));
  CHECK(rd.must_sync);
  CHECK(OfType(rd.messages, MessageType::kRequestVoteResponse).empty());
  CHECK(OfType(rd.messages_after_persist, MessageType::kRequestVoteResponse).size() == 1);
  c.node(1).Advance(rd);

  Message append = Msg(MessageType::kAppendEntries, 2, 1, 2);
  append.index = Idx(1);
  append.log_term = T(1);
  append.entries = EntriesWithTerms(2, {2});
  c.node(1).Step(append);
  rd = c.node(1).GetReady();
  CHECK(rd.entries.size() == 1);
  CHECK(OfType(rd.messages, MessageType::kAppendEntriesResponse).empty());
  CHECK(OfType(rd.messages_after_persist, MessageType::kAppendEntriesResponse).size() == 1);
  c.node(1).Advance(rd);
}

}  // namespace
}  // namespace epoch::raft::test

namespace epoch::raft::test {
namespace {

TEST_CASE("malformed messages from the network are dropped, not trusted", "[raft][robust]") {
  TestCluster c(3);
  REQUIRE(c.PassBootWindow());
  Node& n = c.node(1);
  std::vector<Message> bad;
  Message gap = Msg(MessageType::kAppendEntries, 2, 1, 2);
  gap.index = Idx(1);
  gap.log_term = T(1);
  gap.entries = EntriesWithTerms(3, {2});  // should start at 2
  bad.push_back(gap);
  Message future = gap;
  future.entries = EntriesWithTerms(2, {5});  // entry term above the message term
  bad.push_back(future);
  Message descending = gap;
  descending.entries = EntriesWithTerms(2, {2, 1});
  bad.push_back(descending);
  Message no_snapshot = Msg(MessageType::kInstallSnapshot, 2, 1, 2);
  bad.push_back(no_snapshot);
  Message zero_term = Msg(MessageType::kHeartbeat, 2, 1, 0);
  bad.push_back(zero_term);
  for (const Message& m : bad) {
    CAPTURE(DescribeMessage(m));
    CHECK(n.Step(m) == StepResult::kIgnored);
  }
  CHECK(n.term() == T(1));
  CHECK(n.last_index() == Idx(1));
  CHECK(n.leader() == kNoNode);
}

}  // namespace
}  // namespace epoch::raft::test
