// Linearizable reads (ReadIndex batching, follower forwarding, the leader lease and its end
// before a transfer) and leadership transfer.
#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

// A leader whose lease has lapsed: its followers are cut off for longer than the lease, then the
// network heals without a heartbeat round having been acknowledged yet.
void LapseLease(TestCluster& c, std::uint64_t leader) {
  c.Isolate(leader);
  while (c.node(leader).LeaseValid()) {
    c.Tick(leader);
    c.Stabilize();
  }
  c.Stabilize();
  c.queue().clear();
  c.Heal();
}

TEST_CASE("ReadIndex: concurrent requests share one heartbeat round", "[raft][read]") {
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  LapseLease(c, 1);
  REQUIRE_FALSE(leader.LeaseValid());
  const LogIndex commit = leader.commit_index();
  for (std::uint64_t ctx = 1; ctx <= 3; ++ctx)
    CHECK(leader.ReadIndex(ctx) == ReadIndexOutcome::kPending);
  c.sent().clear();
  c.Process(1);
  CHECK(c.CountSent(MessageType::kHeartbeat) == 2);  // one round for three reads
  CHECK(c.at(1).reads.empty());
  // A read that arrives after that round went out needs the next one.
  CHECK(leader.ReadIndex(4) == ReadIndexOutcome::kPending);
  c.DeliverQueued();  // heartbeats
  c.ProcessAll();
  c.DeliverQueued();               // answers
  REQUIRE(c.at(1).reads.empty());  // not handed out yet
  c.Process(1);                    // hands out reads 1-3 and sends the round for read 4
  REQUIRE(c.at(1).reads.size() == 3);
  for (std::uint64_t ctx = 1; ctx <= 3; ++ctx) {
    CHECK(c.at(1).reads[ctx - 1] == ReadState{ctx, commit, false});
  }
  c.Stabilize();
  REQUIRE(c.at(1).reads.size() == 4);
  CHECK(c.at(1).reads[3].context == 4);
}

TEST_CASE("ReadIndex: a new leader waits for its first commit before serving reads",
          "[raft][read]") {
  TestCluster c(3);
  REQUIRE(c.PassBootWindow());
  c.node(1).Campaign();
  // Deliver only the election, not the no-op's replication.
  c.SetDropFilter([](const Message& m) { return m.type == MessageType::kAppendEntries; });
  c.Stabilize();
  Node& leader = c.node(1);
  REQUIRE(leader.role() == Role::kLeader);
  REQUIRE(leader.commit_index() < leader.last_index());
  CHECK(leader.ReadIndex(9) == ReadIndexOutcome::kPending);
  CHECK_FALSE(leader.LeaseValid());
  c.SetDropFilter({});
  c.Run(3);
  REQUIRE(c.at(1).reads.size() == 1);
  CHECK(c.at(1).reads[0].index == leader.last_index());  // at least the no-op of its term
}

TEST_CASE("ReadIndex: followers forward to the leader, no leader, no read", "[raft][read]") {
  TestCluster c(3);
  CHECK(c.node(2).ReadIndex(5) == ReadIndexOutcome::kNoLeader);
  c.BootAndElect(1);
  CHECK(c.node(2).ReadIndex(5) == ReadIndexOutcome::kForwarded);
  c.Stabilize();
  REQUIRE(c.at(2).reads.size() == 1);
  CHECK(c.at(2).reads[0].context == 5);
  CHECK(c.at(2).reads[0].index == c.node(1).commit_index());
}

TEST_CASE("ReadIndex: a single voter confirms reads at once", "[raft][read]") {
  TestCluster c(1);
  c.Elect(1);
  REQUIRE(c.node(1).role() == Role::kLeader);
  CHECK(c.node(1).ReadIndex(3) == ReadIndexOutcome::kConfirmed);
  c.Process(1);
  REQUIRE(c.at(1).reads.size() == 1);
}

TEST_CASE("lease: starts at the send tick of an acknowledged round and lasts floor/(1+rho)-eps",
          "[raft][lease]") {
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  const Config& k = c.at(1).config;
  const std::int64_t lease = k.EffectiveLeaseTicks();
  REQUIRE(lease == 7);  // floor(10 / 1.05) - 2
  c.Run(3);
  REQUIRE(leader.LeaseValid());
  // Cut the followers off; the last acknowledged round was sent at some tick s <= now.
  c.Isolate(1);
  const std::int64_t expiry = leader.lease_expiry_tick();
  CHECK(expiry <= leader.now_ticks() + lease);
  CHECK(expiry > leader.now_ticks());
  CHECK(leader.ReadIndex(1) == ReadIndexOutcome::kLease);
  c.Process(1);
  REQUIRE(c.at(1).reads.size() == 1);
  CHECK(c.at(1).reads[0].via_lease);
  while (leader.now_ticks() < expiry - 1) leader.Tick();
  CHECK(leader.LeaseValid());
  leader.Tick();  // now == expiry
  CHECK_FALSE(leader.LeaseValid());
  CHECK(leader.ReadIndex(2) == ReadIndexOutcome::kPending);
}

TEST_CASE("lease: the round that starts it was sent after the request that confirms it",
          "[raft][lease]") {
  // A round sent at tick s and acknowledged at tick s + d gives expiry s + lease, not s + d +
  // lease.
  TestCluster c(3);
  c.BootAndElect(1);
  Node& leader = c.node(1);
  LapseLease(c, 1);
  // Tick until a round goes out...
  std::int64_t sent = -1;
  while (sent < 0) {
    leader.Tick();
    c.Process(1);
    for (const Message& m : c.queue()) {
      if (m.type == MessageType::kHeartbeat) sent = leader.now_ticks();
    }
  }
  c.DeliverQueued();
  c.ProcessAll();
  leader.Tick();  // ...and is acknowledged three ticks later
  leader.Tick();
  leader.Tick();
  c.DeliverQueued();
  CHECK(leader.LeaseValid());
  CHECK(leader.lease_expiry_tick() == sent + c.at(1).config.EffectiveLeaseTicks());
}

TEST_CASE("lease: lease reads stop as soon as a leadership transfer starts", "[raft][lease]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Run(3);
  Node& leader = c.node(1);
  REQUIRE(leader.LeaseValid());
  c.Isolate(2);  // the transfer cannot complete
  CHECK(leader.TransferLeadership(Id(2)) == TransferOutcome::kStarted);
  CHECK_FALSE(leader.LeaseValid());
  CHECK(leader.ReadIndex(1) == ReadIndexOutcome::kPending);
  CHECK(leader.Status().transfer_target == Id(2));
}

TEST_CASE("lease: once TimeoutNow went out, the lease is over for the rest of the term",
          "[raft][lease]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Run(3);
  Node& leader = c.node(1);
  // TimeoutNow is lost: the transfer times out and leader 1 stays.
  c.SetDropFilter([](const Message& m) { return m.type == MessageType::kTimeoutNow; });
  REQUIRE(leader.TransferLeadership(Id(2)) == TransferOutcome::kStarted);
  c.Run(c.at(1).config.election_timeout_min_ticks + 1);
  REQUIRE(c.CountSent(MessageType::kTimeoutNow) == 1);
  REQUIRE(leader.role() == Role::kLeader);
  REQUIRE(leader.Status().transfer_target == kNoNode);
  CHECK(leader.Propose({"again"}).ok());
  c.Run(5);
  CHECK_FALSE(leader.LeaseValid());  // a delayed TimeoutNow could still elect node 2
}

TEST_CASE("transfer: an up-to-date target takes over at once, despite vote withholding",
          "[raft][transfer]") {
  TestCluster c(3);
  c.BootAndElect(1);
  const Term term = c.node(1).term();
  c.sent().clear();
  CHECK(c.node(1).TransferLeadership(Id(2)) == TransferOutcome::kStarted);
  c.Stabilize();
  CHECK(c.node(2).role() == Role::kLeader);
  CHECK(c.node(2).term() == term.Next());
  CHECK(c.node(1).role() == Role::kFollower);
  CHECK(c.CountSent(MessageType::kPreVote) == 0);  // TimeoutNow skips pre-vote
}

TEST_CASE("transfer: a lagging target catches up first, then gets TimeoutNow", "[raft][transfer]") {
  TestCluster c(3);
  c.BootAndElect(1);
  c.Isolate(3);
  for (int i = 0; i < 5; ++i) REQUIRE(c.node(1).Propose({"x"}).ok());
  c.Stabilize();
  c.Heal();
  c.sent().clear();
  CHECK(c.node(1).TransferLeadership(Id(3)) == TransferOutcome::kStarted);
  CHECK(c.node(1).Propose({"refused"}).error == ProposeError::kTransferInProgress);
  c.Process(1);
  CHECK(OfType(std::vector<Message>(c.queue().begin(), c.queue().end()), MessageType::kTimeoutNow)
            .empty());
  c.Stabilize();
  CHECK(c.CountSent(MessageType::kTimeoutNow) == 1);
  CHECK(c.node(3).role() == Role::kLeader);
}

TEST_CASE("transfer: abandoned after the transfer timeout, errors", "[raft][transfer]") {
  TestCluster c(3);
  CHECK(c.node(1).TransferLeadership(Id(2)) == TransferOutcome::kNotLeader);
  c.BootAndElect(1);
  CHECK(c.node(1).TransferLeadership(Id(1)) == TransferOutcome::kTargetIsSelf);
  CHECK(c.node(1).TransferLeadership(Id(9)) == TransferOutcome::kTargetNotVoter);
  c.Isolate(3);
  REQUIRE(c.node(1).Propose({"lag"}).ok());
  c.Stabilize();
  CHECK(c.node(1).TransferLeadership(Id(3)) == TransferOutcome::kStarted);
  CHECK(c.node(1).TransferLeadership(Id(3)) == TransferOutcome::kAlreadyInProgress);
  c.Run(c.at(1).config.EffectiveTransferTimeoutTicks() - 1);
  CHECK(c.node(1).Propose({"x"}).error == ProposeError::kTransferInProgress);
  c.Run(1);
  CHECK(c.node(1).Propose({"x"}).ok());
  CHECK(c.node(1).role() == Role::kLeader);
}

}  // namespace
}  // namespace epoch::raft::test
