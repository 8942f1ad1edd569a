// PeerFrameGate: the sender of a frame is the connection's member; frames from non-members,
// with a forged sender or recipient, implausible numbers, or a TimeoutNow not from the leader of
// the current term are dropped and counted; the rest reach their route.
#include "epoch/peer/peer_frame_gate.h"

#include <catch2/catch.hpp>
#include <limits>
#include <optional>
#include <vector>

#include "epoch/peer/peer_codec.h"
#include "epoch/peer/peer_forwarder.h"

namespace epoch::server {
namespace {

const NodeId kSelf{2};
const NodeId kLeader{1};
const NodeId kFollower{3};
const NodeId kStranger{9};
const Term kTerm{5};

struct Routed {
  std::vector<raft::Message> raft;
  std::vector<raftpb::Message> snapshot;
  std::vector<NodeId> forward_requests;
  std::vector<NodeId> forward_responses;
};

struct Fixture {
  PeerDrops drops;
  Routed routed;
  NodeId leader = kLeader;
  PeerFrameGate gate{kSelf, {kLeader, kSelf, kFollower}, drops, Routes()};

  PeerFrameGate::Routes Routes() {
    PeerFrameGate::Routes r;
    r.raft = [this](raft::Message m) { routed.raft.push_back(std::move(m)); };
    r.snapshot = [this](raftpb::Message m) { routed.snapshot.push_back(std::move(m)); };
    r.forward_request = [this](NodeId from, const raftpb::ForwardRequest&) {
      routed.forward_requests.push_back(from);
    };
    r.forward_response = [this](NodeId from, const raftpb::ForwardResponse&) {
      routed.forward_responses.push_back(from);
    };
    r.leader = [this] { return std::pair{leader, kTerm}; };
    return r;
  }

  std::size_t RoutedCount() const {
    return routed.raft.size() + routed.snapshot.size() + routed.forward_requests.size() +
           routed.forward_responses.size();
  }
};

raft::Message Heartbeat(NodeId from, NodeId to, Term term = kTerm) {
  raft::Message m;
  m.type = raft::MessageType::kHeartbeat;
  m.from = from;
  m.to = to;
  m.term = term;
  return m;
}

TEST_CASE("peer gate: a frame from the connection's member reaches the driver", "[peer][gate]") {
  Fixture f;
  f.gate.Handle(kLeader, EncodeFrame(Heartbeat(kLeader, kSelf)));
  REQUIRE(f.routed.raft.size() == 1);
  CHECK(f.routed.raft[0].from == kLeader);
}

TEST_CASE("peer gate: a frame naming another sender than the connection's is dropped",
          "[peer][gate]") {
  Fixture f;
  // A follower's connection carrying a message "from the leader".
  f.gate.Handle(kFollower, EncodeFrame(Heartbeat(kLeader, kSelf)));
  CHECK(f.RoutedCount() == 0);
  CHECK(f.drops.Get(FrameDrop::kSenderMismatch) == 1);
}

TEST_CASE("peer gate: frames from non-members and removed members are dropped", "[peer][gate]") {
  Fixture f;
  f.gate.Handle(kStranger, EncodeFrame(Heartbeat(kStranger, kSelf)));
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 1);
  CHECK_FALSE(f.gate.IsMember(kStranger));
  CHECK_FALSE(f.gate.IsMember(kSelf));
  CHECK(f.gate.IsMember(kFollower));
  // kFollower is removed from the configuration: its open connection no longer counts.
  f.gate.SetMembers(raft::ConfState{{kLeader, kSelf}, {}});
  f.gate.Handle(kFollower, EncodeFrame(Heartbeat(kFollower, kSelf)));
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 2);
  CHECK_FALSE(f.gate.IsMember(kFollower));
  // A learner is a member.
  f.gate.SetMembers(raft::ConfState{{kLeader, kSelf}, {kFollower}});
  CHECK(f.gate.IsMember(kFollower));
  CHECK(f.RoutedCount() == 0);
}

TEST_CASE("peer gate: a removed member delivers only what its removal races: answers, hand-over",
          "[peer][gate]") {
  Fixture f;
  // The leader applied its own removal; this node applied it too before the leader's last frames
  // arrived.
  f.gate.SetMembers(raft::ConfState{{kSelf, kFollower}, {}});
  CHECK_FALSE(f.gate.IsMember(kLeader));
  f.gate.Handle(kLeader, PeerForwarder::EncodeResponse(7, Status::Ok(), {}));
  CHECK(f.routed.forward_responses == std::vector<NodeId>{kLeader});
  raft::Message timeout = Heartbeat(kLeader, kSelf);
  timeout.type = raft::MessageType::kTimeoutNow;
  f.gate.Handle(kLeader, EncodeFrame(timeout));
  REQUIRE(f.routed.raft.size() == 1);
  CHECK(f.routed.raft[0].type == raft::MessageType::kTimeoutNow);
  // Everything else from it is refused: Raft traffic, snapshots, forwarded writes, and a
  // TimeoutNow once it no longer leads this node's term.
  f.gate.Handle(kLeader, EncodeFrame(Heartbeat(kLeader, kSelf)));
  f.gate.Handle(kLeader, PeerForwarder::EncodeRequest(8, v1::InternalRequest()));
  raftpb::Frame chunk;
  chunk.mutable_message()->set_type(raftpb::INSTALL_SNAPSHOT);
  chunk.mutable_message()->set_from(kLeader.value());
  chunk.mutable_message()->set_to(kSelf.value());
  f.gate.Handle(kLeader, chunk.SerializeAsString());
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 3);
  f.leader = kFollower;
  f.gate.Handle(kLeader, EncodeFrame(timeout));
  CHECK(f.drops.Get(FrameDrop::kTimeoutNotLeader) == 1);
  CHECK(f.RoutedCount() == 2);
  // A stranger that never was a member gets nothing through.
  f.gate.Handle(kStranger, PeerForwarder::EncodeResponse(9, Status::Ok(), {}));
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 4);
}

TEST_CASE("peer gate: removed members are remembered boundedly and forgotten when re-added",
          "[peer][gate]") {
  Fixture f;
  std::vector<NodeId> voters = {kSelf};
  for (std::uint64_t i = 100; i < 100 + PeerFrameGate::kMaxDeparted + 4; ++i) {
    voters.push_back(NodeId(i));
  }
  f.gate.SetMembers(raft::ConfState{voters, {}});
  f.gate.SetMembers(raft::ConfState{{kSelf}, {}});  // all of them removed at once
  f.gate.Handle(NodeId(100), PeerForwarder::EncodeResponse(1, Status::Ok(), {}));  // forgotten
  f.gate.Handle(voters.back(), PeerForwarder::EncodeResponse(2, Status::Ok(), {}));
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 1);
  CHECK(f.routed.forward_responses == std::vector<NodeId>{voters.back()});
  // Back as a member: everything is taken again.
  f.gate.SetMembers(raft::ConfState{{kSelf, voters.back()}, {}});
  f.gate.Handle(voters.back(), EncodeFrame(Heartbeat(voters.back(), kSelf)));
  CHECK(f.routed.raft.size() == 1);
}

TEST_CASE("peer gate: a frame for another recipient is dropped", "[peer][gate]") {
  Fixture f;
  f.gate.Handle(kLeader, EncodeFrame(Heartbeat(kLeader, kFollower)));
  CHECK(f.RoutedCount() == 0);
  CHECK(f.drops.Get(FrameDrop::kWrongRecipient) == 1);
}

TEST_CASE("peer gate: garbage and implausible terms are dropped", "[peer][gate]") {
  Fixture f;
  f.gate.Handle(kLeader, "\xff\xff\xff not a frame");
  CHECK(f.drops.Get(FrameDrop::kUnparsable) == 1);
  f.gate.Handle(kLeader, EncodeFrame(Heartbeat(kLeader, kSelf,
                                               Term(std::numeric_limits<std::uint64_t>::max()))));
  f.gate.Handle(kLeader, EncodeFrame(Heartbeat(kLeader, kSelf, Term(raft::kMaxPlausibleValue))));
  CHECK(f.drops.Get(FrameDrop::kMalformed) == 2);
  CHECK(f.RoutedCount() == 0);
}

TEST_CASE("peer gate: TimeoutNow only from the leader of the current term", "[peer][gate]") {
  Fixture f;
  raft::Message timeout = Heartbeat(kFollower, kSelf);
  timeout.type = raft::MessageType::kTimeoutNow;
  f.gate.Handle(kFollower, EncodeFrame(timeout));  // a follower is not the leader
  timeout.from = kLeader;
  timeout.term = kTerm.Next();  // the leader, but not of our term
  f.gate.Handle(kLeader, EncodeFrame(timeout));
  CHECK(f.drops.Get(FrameDrop::kTimeoutNotLeader) == 2);
  CHECK(f.RoutedCount() == 0);
  timeout.term = kTerm;
  f.gate.Handle(kLeader, EncodeFrame(timeout));
  REQUIRE(f.routed.raft.size() == 1);
  CHECK(f.routed.raft[0].type == raft::MessageType::kTimeoutNow);
}

TEST_CASE("peer gate: snapshot traffic and forwards are routed with the connection's member",
          "[peer][gate]") {
  Fixture f;
  raftpb::Frame chunk;
  chunk.mutable_message()->set_type(raftpb::INSTALL_SNAPSHOT);
  chunk.mutable_message()->set_from(kLeader.value());
  chunk.mutable_message()->set_to(kSelf.value());
  f.gate.Handle(kLeader, chunk.SerializeAsString());
  CHECK(f.routed.snapshot.size() == 1);
  // The same chunk on a follower's connection names another sender.
  f.gate.Handle(kFollower, chunk.SerializeAsString());
  CHECK(f.drops.Get(FrameDrop::kSenderMismatch) == 1);
  CHECK(f.routed.snapshot.size() == 1);

  f.gate.Handle(kFollower, PeerForwarder::EncodeRequest(7, v1::InternalRequest()));
  f.gate.Handle(kLeader, PeerForwarder::EncodeResponse(7, Status::Ok(), {}));
  CHECK(f.routed.forward_requests == std::vector<NodeId>{kFollower});
  CHECK(f.routed.forward_responses == std::vector<NodeId>{kLeader});
  f.gate.Handle(kStranger, PeerForwarder::EncodeRequest(8, v1::InternalRequest()));
  CHECK(f.routed.forward_requests.size() == 1);
  CHECK(f.drops.Get(FrameDrop::kNotMember) == 1);
}

TEST_CASE("peer drops: every reason is rendered for /metrics", "[peer][gate]") {
  PeerDrops drops;
  drops.Count(FrameDrop::kSenderMismatch);
  drops.Count(ConnectionRefusal::kPerAddressLimit);
  std::string out;
  MetricsText m(&out);
  drops.RenderMetrics(m);
  CHECK(out.find("epoch_peer_frames_dropped_total{reason=\"sender_mismatch\"} 1\n") !=
        std::string::npos);
  CHECK(out.find("epoch_peer_frames_dropped_total{reason=\"not_member\"} 0\n") !=
        std::string::npos);
  CHECK(out.find("epoch_peer_connections_refused_total{reason=\"per_address_limit\"} 1\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace epoch::server
