// PeerForwarder: follower -> leader writes over the peer link, with fake hooks in place of the
// transport and the driver (no sockets, no Raft): what is sent, when it is refused, and how
// every way a forwarded write can end reaches the caller.
#include "epoch/peer/peer_forwarder.h"

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <future>
#include <optional>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"

namespace epoch::server {
namespace {

using Clock = std::chrono::steady_clock;

const NodeId kFollower{1};
const NodeId kLeader{2};

struct Sent {
  NodeId to;
  std::string frame;
  std::function<void()> not_sent;
};

struct Outcome {
  Status status;
  v1::InternalResponse response;
};

// Records frames instead of sending them; the link's state and the leader's proposals are set
// by the test.
struct FakeLink {
  std::vector<Sent> sent;
  bool connected = true;
  std::vector<std::pair<v1::InternalRequest, PeerForwarder::Callback>> proposed;

  PeerForwarder::Hooks Hooks() {
    PeerForwarder::Hooks h;
    h.send = [this](NodeId to, std::string frame, std::function<void()> not_sent) {
      sent.push_back({to, std::move(frame), std::move(not_sent)});
    };
    h.connected = [this](NodeId) { return connected; };
    h.propose = [this](v1::InternalRequest r, PeerForwarder::Callback done) {
      proposed.emplace_back(std::move(r), std::move(done));
    };
    return h;
  }
};

raftpb::Frame Parse(const std::string& bytes) {
  raftpb::Frame f;
  REQUIRE(f.ParseFromString(bytes));
  return f;
}

v1::InternalRequest PutRequest(const std::string& key) {
  v1::InternalRequest r;
  r.mutable_put()->set_key(key);
  r.mutable_put()->set_value("v");
  return r;
}

PeerForwarder::Callback Into(std::optional<Outcome>* out) {
  return [out](const Status& s, const v1::InternalResponse& r) { *out = Outcome{s, r}; };
}

TEST_CASE("peer forward: a write makes the round trip follower to leader and back", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink follower_link;
  FakeLink leader_link;
  PeerForwarder follower(pool.get_executor(), follower_link.Hooks());
  PeerForwarder leader(pool.get_executor(), leader_link.Hooks());

  std::optional<Outcome> got;
  follower.Forward(kLeader, PutRequest("k"), Clock::now() + std::chrono::seconds(10), Into(&got));
  REQUIRE(follower_link.sent.size() == 1);
  CHECK(follower_link.sent[0].to == kLeader);
  CHECK(follower.pending() == 1);

  raftpb::Frame request = Parse(follower_link.sent[0].frame);
  REQUIRE(request.has_forward_request());
  leader.Serve(kFollower, request.forward_request());
  REQUIRE(leader_link.proposed.size() == 1);
  CHECK(leader_link.proposed[0].first.put().key() == "k");

  v1::InternalResponse response;
  response.mutable_put()->mutable_header()->set_revision(42);
  leader_link.proposed[0].second(Status::Ok(), response);
  REQUIRE(leader_link.sent.size() == 1);
  CHECK(leader_link.sent[0].to == kFollower);

  raftpb::Frame answer = Parse(leader_link.sent[0].frame);
  REQUIRE(answer.has_forward_response());
  CHECK_FALSE(got.has_value());
  follower.HandleResponse(kLeader, answer.forward_response());
  REQUIRE(got.has_value());
  CHECK(got->status.ok());
  CHECK(got->response.put().header().revision() == 42);
  CHECK(follower.pending() == 0);

  // A duplicate answer (or one after a timeout) finds nothing and changes nothing.
  got.reset();
  follower.HandleResponse(kLeader, answer.forward_response());
  CHECK_FALSE(got.has_value());
}

TEST_CASE("peer forward: the leader's refusal reaches the caller with etcd's message",
          "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  PeerForwarder follower(pool.get_executor(), link.Hooks());
  std::optional<Outcome> got;
  follower.Forward(kLeader, PutRequest("k"), Clock::now() + std::chrono::seconds(10), Into(&got));
  raftpb::Frame request = Parse(link.sent.at(0).frame);

  std::string answer = PeerForwarder::EncodeResponse(request.forward_request().id(),
                                                     etcd_errors::kNotLeader.ToStatus(), {});
  follower.HandleResponse(kLeader, Parse(answer).forward_response());
  REQUIRE(got.has_value());
  CHECK(got->status.code() == StatusCode::kNotLeader);
  CHECK(got->status.message() == epoch::etcd_errors::kNotLeader.message);
}

TEST_CASE("peer forward: nothing is sent while the link to the leader is down", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  link.connected = false;
  PeerForwarder follower(pool.get_executor(), link.Hooks());
  std::optional<Outcome> got;
  follower.Forward(kLeader, PutRequest("k"), Clock::now() + std::chrono::seconds(10), Into(&got));
  REQUIRE(got.has_value());
  CHECK(got->status.Is(ErrorId::kLeaderUnreachable));
  CHECK(link.sent.empty());
  CHECK(follower.pending() == 0);
}

TEST_CASE("peer forward: a lost link or a passed deadline is an unknown outcome", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  PeerForwarder follower(pool.get_executor(), link.Hooks());

  std::optional<Outcome> lost;
  std::optional<Outcome> other_peer;
  follower.Forward(kLeader, PutRequest("a"), Clock::now() + std::chrono::seconds(10), Into(&lost));
  follower.Forward(NodeId(3), PutRequest("b"), Clock::now() + std::chrono::seconds(10),
                   Into(&other_peer));
  follower.PeerLost(kLeader);
  REQUIRE(lost.has_value());
  CHECK(lost->status.message() == etcd_errors::kTimeoutDueToConnectionLost.message);
  CHECK_FALSE(other_peer.has_value());  // only writes sent to the lost peer end

  // An answer from a node the write was not sent to is ignored.
  raftpb::Frame to_three = Parse(link.sent.at(1).frame);
  follower.HandleResponse(kLeader, Parse(PeerForwarder::EncodeResponse(
                                             to_three.forward_request().id(), Status::Ok(), {}))
                                       .forward_response());
  CHECK_FALSE(other_peer.has_value());

  std::promise<Outcome> timed_out;
  follower.Forward(kLeader, PutRequest("c"), Clock::now() + std::chrono::milliseconds(20),
                   [&timed_out](const Status& s, const v1::InternalResponse& r) {
                     timed_out.set_value(Outcome{s, r});
                   });
  auto future = timed_out.get_future();
  REQUIRE(future.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(future.get().status.message() == etcd_errors::kTimeout.message);

  follower.Stop();
  REQUIRE(other_peer.has_value());
  CHECK(other_peer->status.message() == etcd_errors::kTimeoutDueToConnectionLost.message);
  std::optional<Outcome> after_stop;
  follower.Forward(kLeader, PutRequest("d"), Clock::now() + std::chrono::seconds(10),
                   Into(&after_stop));
  REQUIRE(after_stop.has_value());
  CHECK(after_stop->status.message() == etcd_errors::kStopped.message);
}

TEST_CASE("peer forward: a frame dropped before it reached the socket was not sent", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  PeerForwarder follower(pool.get_executor(), link.Hooks());
  std::optional<Outcome> got;
  follower.Forward(kLeader, PutRequest("k"), Clock::now() + std::chrono::seconds(10), Into(&got));
  REQUIRE(link.sent.size() == 1);
  REQUIRE(link.sent[0].not_sent);
  // The link failed while the frame was still queued (the transport reports it before it
  // reports the peer lost): the write never left, so it may go to the next leader.
  link.sent[0].not_sent();
  REQUIRE(got.has_value());
  CHECK(got->status.Is(ErrorId::kLeaderUnreachable));
  CHECK(follower.pending() == 0);
  got.reset();
  follower.PeerLost(kLeader);
  CHECK_FALSE(got.has_value());
}

TEST_CASE("peer forward: the leader refuses malformed and unforwardable requests", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  PeerForwarder leader(pool.get_executor(), link.Hooks());

  raftpb::ForwardRequest garbage;
  garbage.set_id(7);
  garbage.set_request(std::string("\xff\xff\xff\xff\x0f", 5));
  leader.Serve(kFollower, garbage);

  raftpb::ForwardRequest lease;
  lease.set_id(8);
  v1::InternalRequest grant;
  grant.mutable_lease_grant();
  grant.SerializeToString(lease.mutable_request());
  leader.Serve(kFollower, lease);

  raftpb::ForwardRequest empty;
  empty.set_id(9);
  leader.Serve(kFollower, empty);

  CHECK(link.proposed.empty());
  REQUIRE(link.sent.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    raftpb::Frame answer = Parse(link.sent[i].frame);
    REQUIRE(answer.has_forward_response());
    CHECK(answer.forward_response().id() == 7 + i);
    CHECK(answer.forward_response().code() ==
          static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  }
}

TEST_CASE("peer forward: a member publishes only its own attributes", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  std::vector<FrameDrop> drops;
  PeerForwarder::Hooks hooks = link.Hooks();
  hooks.on_drop = [&drops](FrameDrop reason) { drops.push_back(reason); };
  PeerForwarder leader(pool.get_executor(), hooks);

  auto publish = [&](NodeId member, std::uint64_t id) {
    v1::InternalRequest r;
    r.mutable_member_attributes()->set_id(member.value());
    r.mutable_member_attributes()->add_client_urls("http://10.0.0.66:2379");
    leader.Serve(kFollower, Parse(PeerForwarder::EncodeRequest(id, r)).forward_request());
  };
  publish(kLeader, 11);  // the follower's link speaks for the leader: forged
  CHECK(link.proposed.empty());
  CHECK(drops == std::vector<FrameDrop>{FrameDrop::kForwardForged});
  REQUIRE(link.sent.size() == 1);
  CHECK(Parse(link.sent[0].frame).forward_response().code() ==
        static_cast<std::uint32_t>(StatusCode::kInvalidArgument));
  publish(kFollower, 12);  // its own: proposed
  CHECK(link.proposed.size() == 1);
}

TEST_CASE("peer forward: ids are unpredictable and answers bind to the asked member", "[forward]") {
  asio::thread_pool pool(1);
  FakeLink link;
  std::vector<FrameDrop> drops;
  PeerForwarder::Hooks hooks = link.Hooks();
  hooks.on_drop = [&drops](FrameDrop reason) { drops.push_back(reason); };
  PeerForwarder follower(pool.get_executor(), hooks);

  std::optional<Outcome> first;
  std::optional<Outcome> second;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  follower.Forward(kLeader, PutRequest("a"), deadline, Into(&first));
  follower.Forward(kLeader, PutRequest("b"), deadline, Into(&second));
  REQUIRE(link.sent.size() == 2);
  const std::uint64_t id1 = Parse(link.sent[0].frame).forward_request().id();
  const std::uint64_t id2 = Parse(link.sent[1].frame).forward_request().id();
  CHECK(id1 != id2);
  CHECK(id2 != id1 + 1);  // not sequential: the next id cannot be guessed from the last

  // Another member answers with the right id: ignored and counted.
  follower.HandleResponse(
      kFollower, Parse(PeerForwarder::EncodeResponse(id1, Status::Ok(), {})).forward_response());
  // A guessed id from the leader's link: nobody waits for it.
  follower.HandleResponse(
      kLeader,
      Parse(PeerForwarder::EncodeResponse(id1 ^ id2, Status::Ok(), {})).forward_response());
  CHECK_FALSE(first.has_value());
  CHECK(drops == std::vector<FrameDrop>{FrameDrop::kForwardUnknown, FrameDrop::kForwardUnknown});
  follower.HandleResponse(
      kLeader, Parse(PeerForwarder::EncodeResponse(id1, Status::Ok(), {})).forward_response());
  REQUIRE(first.has_value());
  CHECK(first->status.ok());
  CHECK(follower.pending() == 1);
  follower.Stop();
}

}  // namespace
}  // namespace epoch::server
