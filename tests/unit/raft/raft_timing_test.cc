// Timing changes at run time (Node::UpdateTiming): the lease follows the floors the quorum
// reported, a lowered floor holds its old value for the contact already answered, a restarted
// node withholds for the floor it replaced, and invalid timing is refused.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

Timing WithFloor(const Config& config, std::int64_t floor) {
  Timing t = config.timing();
  t.election_timeout_min_ticks = floor;
  t.election_jitter_ticks = floor;
  t.max_election_timeout_ticks = 4 * floor;
  return t;
}

// Lease length of the rounds acknowledged from now on: run a few rounds, then the expiry is the
// send tick of the last acknowledged one (at most a heartbeat ago) plus the lease.
std::int64_t LeaseNow(TestCluster& c, std::uint64_t leader) {
  c.Run(3 * c.at(leader).config.heartbeat_ticks);
  REQUIRE(c.node(leader).LeaseValid());
  return c.node(leader).lease_expiry_tick() - c.node(leader).now_ticks();
}

// A pre-vote for the next term from node `from`, as up to date as `to`.
Message PreVoteFrom(TestCluster& c, std::uint64_t from, std::uint64_t to) {
  Message m = Msg(MessageType::kPreVote, from, to, c.node(to).term().value() + 1);
  m.index = c.node(to).last_index();
  m.log_term = c.node(to).term();
  return m;
}

TEST_CASE("timing: answers to the leader carry the sender's election floor", "[raft][timing]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(2).UpdateTiming(WithFloor(c.at(2).config, 30)).ok());
  c.sent().clear();
  c.Run(4);
  bool seen = false;
  for (const Message& m : c.sent()) {
    if (m.from != Id(2)) continue;
    if (m.type != MessageType::kHeartbeatResponse &&
        m.type != MessageType::kAppendEntriesResponse) {
      continue;
    }
    CHECK(m.floor == 30);
    seen = true;
  }
  CHECK(seen);
  CHECK(c.node(2).Status().timing.election_timeout_min_ticks == 30);
}

TEST_CASE("timing: the lease takes the smallest floor of the acknowledging quorum",
          "[raft][timing][lease]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) { k.mutations.lease_from_own_floor = mutated; });
    c.BootAndElect(1);
    const Config& k = c.at(1).config;
    CHECK(LeaseNow(c, 1) <= k.LeaseTicksFor(10));  // 7
    // The leader raises its floor first: its followers still vote 10 ticks after its rounds.
    REQUIRE(c.node(1).UpdateTiming(WithFloor(k, 30)).ok());
    if (mutated) {
      CHECK(LeaseNow(c, 1) > k.LeaseTicksFor(10));  // the bug: a 26-tick lease
    } else {
      CHECK(LeaseNow(c, 1) <= k.LeaseTicksFor(10));
    }
    // One follower raises too: a quorum of {1, 2} at 30 may acknowledge, but node 3 (at 10) is
    // in every quorum the leader counts only when it acknowledged; the smallest acknowledging
    // floor still decides.
    REQUIRE(c.node(2).UpdateTiming(WithFloor(k, 30)).ok());
    REQUIRE(c.node(3).UpdateTiming(WithFloor(k, 30)).ok());
    const std::int64_t raised = LeaseNow(c, 1);
    CHECK(raised > k.LeaseTicksFor(10));
    CHECK(raised <= k.LeaseTicksFor(30));  // floor(30 / 1.05) - 2 = 26
  }
}

TEST_CASE("timing: a lowered floor keeps the old one for the leader contact already answered",
          "[raft][timing][withhold]") {
  for (bool mutated : {false, true}) {
    CAPTURE(mutated);
    TestCluster c(3, [&](Config& k) {
      k.SetTiming(WithFloor(k, 30));
      k.mutations.lower_floor_without_hold = mutated;
    });
    c.BootAndElect(1);
    c.Run(4);
    c.Isolate(1);  // node 2's last leader contact was answered with floor 30
    REQUIRE(c.node(2).UpdateTiming(WithFloor(c.at(2).config, 10)).ok());
    for (int i = 0; i < 15; ++i) c.node(2).Tick();
    // 15 ticks after the contact: past the new floor, within the old one.
    const StepResult early = c.node(2).Step(PreVoteFrom(c, 3, 2));
    if (mutated) {
      CHECK(early == StepResult::kOk);
    } else {
      CHECK(early == StepResult::kWithheld);
      // Nor does it campaign itself before the old floor has passed, though its timer (10-19
      // ticks) has fired.
      for (int i = 0; i < 13; ++i) c.node(2).Tick();
      CHECK(c.node(2).role() == Role::kFollower);
      for (int i = 0; i < 25; ++i) c.node(2).Tick();
      CHECK(c.node(2).role() != Role::kFollower);
    }
  }
}

TEST_CASE("timing: a node started with boot_withhold_ticks withholds for that long",
          "[raft][timing][withhold]") {
  TestCluster c(3, [](Config& k) { k.boot_withhold_ticks = 30; });
  for (int i = 0; i < 15; ++i) c.node(2).Tick();
  CHECK(c.node(2).Step(PreVoteFrom(c, 3, 2)) == StepResult::kWithheld);
  CHECK(c.node(2).role() == Role::kFollower);
  for (int i = 0; i < 16; ++i) c.node(2).Tick();
  CHECK(c.node(2).Step(PreVoteFrom(c, 3, 2)) == StepResult::kOk);
}

TEST_CASE("timing: invalid timing is refused and changes nothing", "[raft][timing]") {
  TestCluster c(3);
  Timing bad = WithFloor(c.at(1).config, 30);
  bad.heartbeat_ticks = 11;  // more than a third of the floor
  const epoch::Status s = c.node(1).UpdateTiming(bad);
  CHECK_FALSE(s.ok());
  CHECK_THAT(s.ToString(), Catch::Contains("heartbeat_ticks (11)"));
  CHECK(c.node(1).Status().timing == c.at(1).config.timing());
}

}  // namespace
}  // namespace epoch::raft::test
