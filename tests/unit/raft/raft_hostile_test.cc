// Messages no correct peer sends: a TimeoutNow from anyone but the leader of the current term,
// and terms or indexes beyond any plausible history. The core drops them and keeps its leader.
#include <catch2/catch.hpp>
#include <limits>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

Message TimeoutNowFrom(std::uint64_t from, std::uint64_t to, Term term) {
  Message m;
  m.type = MessageType::kTimeoutNow;
  m.from = NodeId(from);
  m.to = NodeId(to);
  m.term = term;
  return m;
}

TEST_CASE("TimeoutNow from a follower of the current term is ignored", "[raft][hostile]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(2).term();
  REQUIRE(c.node(2).leader() == NodeId(1));
  CHECK(c.node(2).Step(TimeoutNowFrom(3, 2, term)) == StepResult::kIgnored);
  c.Stabilize();
  CHECK(c.node(2).role() == Role::kFollower);
  CHECK(c.node(2).term() == term);
  CHECK(c.Leader() == NodeId(1));
  CHECK(c.node(1).LeaseValid());
}

TEST_CASE("TimeoutNow claiming a newer term is ignored, the term is kept", "[raft][hostile]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(2).term();
  // Even "from the leader": a leader's TimeoutNow carries its own term, never a newer one.
  CHECK(c.node(2).Step(TimeoutNowFrom(1, 2, Term(term.value() + 5))) == StepResult::kIgnored);
  CHECK(c.node(2).Step(TimeoutNowFrom(3, 2, Term(term.value() + 5))) == StepResult::kIgnored);
  c.Stabilize();
  CHECK(c.node(2).term() == term);
  CHECK(c.node(2).role() == Role::kFollower);
  CHECK(c.Leader() == NodeId(1));
}

TEST_CASE("TimeoutNow from the leader of the current term still transfers", "[raft][hostile]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(2).term();
  CHECK(c.node(2).Step(TimeoutNowFrom(1, 2, term)) == StepResult::kOk);
  c.Stabilize();
  CHECK(c.Leader() == NodeId(2));
}

TEST_CASE("a message with an implausible term is dropped, the term never wraps",
          "[raft][hostile]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(2).term();
  for (std::uint64_t huge : {kMaxPlausibleValue, std::numeric_limits<std::uint64_t>::max()}) {
    for (MessageType type : {MessageType::kHeartbeat, MessageType::kAppendEntries,
                             MessageType::kRequestVote, MessageType::kPreVote}) {
      Message m;
      m.type = type;
      m.from = NodeId(3);
      m.to = NodeId(2);
      m.term = Term(huge);
      CHECK(c.node(2).Step(m) == StepResult::kIgnored);
    }
  }
  c.Stabilize();
  CHECK(c.node(2).term() == term);
  CHECK(c.Leader() == NodeId(1));
}

TEST_CASE("a message with an implausible index or entry is dropped", "[raft][hostile]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(2).term();
  const LogIndex last = c.log(2).LastIndex();
  Message m;
  m.type = MessageType::kAppendEntries;
  m.from = NodeId(1);
  m.to = NodeId(2);
  m.term = term;
  m.log_term = term;
  m.index = LogIndex(kMaxPlausibleValue);
  m.entries.push_back(Entry{term, LogIndex(kMaxPlausibleValue + 1), EntryType::kNormal, "x"});
  CHECK(c.node(2).Step(m) == StepResult::kIgnored);
  Message hb;
  hb.type = MessageType::kHeartbeat;
  hb.from = NodeId(1);
  hb.to = NodeId(2);
  hb.term = term;
  hb.commit = LogIndex(std::numeric_limits<std::uint64_t>::max());
  CHECK(c.node(2).Step(hb) == StepResult::kIgnored);
  c.Stabilize();
  CHECK(c.log(2).LastIndex() == last);
  CHECK(c.Leader() == NodeId(1));
}

}  // namespace
}  // namespace epoch::raft::test
