// Each Config::Mutations flag (deliberate bug for the simulator's self-test) changes behaviour in
// exactly the way its comment says; with the flag off, the same scenario is safe.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

TEST_CASE("mutation no_election_restriction: votes for a candidate with a stale log",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) {
      k.pre_vote = false;
      k.mutations.no_election_restriction = mutated;
    });
    c.SetLog(1, EntriesWithTerms(2, {2, 2}), HardState{T(2), kNoNode, Idx(1)});
    REQUIRE(c.PassBootWindow());
    Message m = Msg(MessageType::kRequestVote, 2, 1, 3);
    m.index = Idx(1);
    m.log_term = T(1);
    c.node(1).Step(m);
    Ready rd = c.node(1).GetReady();
    auto resp = OfType(rd.messages_after_persist, MessageType::kRequestVoteResponse);
    REQUIRE(resp.size() == 1);
    CHECK(resp[0].reject == !mutated);
    c.node(1).Advance(rd);
  }
}

TEST_CASE("mutation commit_prior_term_by_counting: commits an older-term entry (Figure 8)",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) {
      k.pre_vote = false;
      k.mutations.commit_prior_term_by_counting = mutated;
    });
    c.SetLog(1, EntriesWithTerms(2, {2}), HardState{T(2), kNoNode, Idx(1)});
    c.SetLog(2, EntriesWithTerms(2, {2}), HardState{T(2), kNoNode, Idx(1)});
    c.SetLog(3, {}, HardState{T(2), kNoNode, Idx(1)});
    REQUIRE(c.PassBootWindow());
    c.node(1).Campaign();
    c.SetDropFilter([](const Message& m) {
      return m.type != MessageType::kRequestVote && m.type != MessageType::kRequestVoteResponse;
    });
    c.Stabilize();
    REQUIRE(c.node(1).role() == Role::kLeader);
    Message ack = Msg(MessageType::kAppendEntriesResponse, 2, 1, 3);
    ack.index = Idx(2);
    c.node(1).Step(ack);
    CHECK(c.node(1).commit_index() == (mutated ? Idx(2) : Idx(1)));
  }
}

TEST_CASE("mutation lease_without_drift_margin: the lease lasts the whole floor",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) { k.mutations.lease_without_drift_margin = mutated; });
    const Config& k = c.at(1).config;
    CHECK(k.EffectiveLeaseTicks() == (mutated ? k.election_timeout_min_ticks : 7));
    c.BootAndElect(1);
    c.Run(3);
    REQUIRE(c.node(1).LeaseValid());
    // The expiry is measured from the send tick of the last acknowledged round.
    const std::int64_t expiry = c.node(1).lease_expiry_tick();
    CHECK(expiry > c.node(1).now_ticks() + k.EffectiveLeaseTicks() - k.heartbeat_ticks - 1);
    CHECK(expiry <= c.node(1).now_ticks() + k.EffectiveLeaseTicks());
  }
}

TEST_CASE("mutation vote_while_leader_live: grants (pre)votes right after hearing the leader",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) { k.mutations.vote_while_leader_live = mutated; });
    c.BootAndElect(1);
    Message m = Msg(MessageType::kPreVote, 3, 2, c.node(1).term().value() + 1);
    m.index = c.node(3).last_index();
    m.log_term = c.node(1).term();
    CHECK(c.node(2).Step(m) == (mutated ? StepResult::kOk : StepResult::kWithheld));
  }
}

TEST_CASE("mutation reply_before_persist: votes and acks leave before the Ready is durable",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) {
      k.pre_vote = false;
      k.mutations.reply_before_persist = mutated;
    });
    REQUIRE(c.PassBootWindow());
    Message vote = Msg(MessageType::kRequestVote, 2, 1, 2);
    vote.index = Idx(1);
    vote.log_term = T(1);
    c.node(1).Step(vote);
    Message append = Msg(MessageType::kAppendEntries, 2, 1, 2);
    append.index = Idx(1);
    append.log_term = T(1);
    append.entries = EntriesWithTerms(2, {2});
    c.node(1).Step(append);
    Ready rd = c.node(1).GetReady();
    const auto& early = rd.messages;
    CHECK(OfType(early, MessageType::kRequestVoteResponse).size() == (mutated ? 1U : 0U));
    CHECK(OfType(early, MessageType::kAppendEntriesResponse).size() == (mutated ? 1U : 0U));
    CHECK(OfType(rd.messages_after_persist, MessageType::kAppendEntriesResponse).size() ==
          (mutated ? 0U : 1U));
    c.node(1).Advance(rd);
  }
}

TEST_CASE("mutation read_index_without_quorum: answers reads with no heartbeat round",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) { k.mutations.read_index_without_quorum = mutated; });
    c.BootAndElect(1);
    c.Isolate(1);  // no heartbeat round can be acknowledged
    while (c.node(1).LeaseValid()) c.Tick(1);
    CHECK(c.node(1).ReadIndex(1) ==
          (mutated ? ReadIndexOutcome::kConfirmed : ReadIndexOutcome::kPending));
    c.Stabilize();
    CHECK(c.at(1).reads.size() == (mutated ? 1U : 0U));
  }
}

TEST_CASE("mutation apply_before_durable: entries of the Ready being written count as durable",
          "[raft][mutation]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) { k.mutations.apply_before_durable = mutated; });
    Message append = Msg(MessageType::kAppendEntries, 2, 1, 2);
    append.index = Idx(1);
    append.log_term = T(1);
    append.entries = EntriesWithTerms(2, {2, 2});
    append.commit = Idx(3);
    REQUIRE(c.node(1).Step(append) == StepResult::kOk);
    Ready rd = c.node(1).GetReady();
    REQUIRE(rd.committed_entries.size() == 2);
    CHECK(rd.durable_committed == (mutated ? 2U : 0U));
    c.log(1).Append(rd.entries);
    c.node(1).Advance(rd);
  }
}

}  // namespace
}  // namespace epoch::raft::test
