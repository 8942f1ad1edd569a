// AnswerJoin (member_join.h): what a running member answers to a joining member and to a member
// asking whether it was removed, from the member table and the published attributes of a real
// store.
#include <catch2/catch.hpp>
#include <span>

#include "epoch/replication/kv_state_machine.h"
#include "epoch/state/member_table.h"
#include "epoch/test_support/temp_dir.h"
#include "member_join.h"

namespace epoch::server {
namespace {

constexpr std::uint64_t kLive = 0xa1;     // added, never started
constexpr std::uint64_t kStarted = 0xa2;  // published its attributes
constexpr std::uint64_t kRemoved = 0xa3;  // removed
constexpr std::uint64_t kLearner = 0xa4;  // added as a learner, never started

v1::ClusterMember Member(std::uint64_t id, const std::string& url) {
  v1::ClusterMember m;
  m.set_id(id);
  m.add_peer_urls(url);
  return m;
}

struct Fixture {
  test_support::TempDir dir{"epoch-answer-join"};
  NodeConfig config;
  std::unique_ptr<KvStore> store;

  Fixture() {
    config.name = "n2";
    REQUIRE(ParseInitialCluster("n2=127.0.0.1:7002", "n2=127.0.0.1:7102", &config).ok());
    auto opened = KvStore::Open(dir.Sub("kv"), KvStoreOptions{});
    REQUIRE(opened.ok());
    store = std::move(*opened);
    // As the log leaves it: one member removed, one added as a learner (sorted by ID).
    auto table = std::make_shared<v1::StoredMemberTable>();
    *table->add_members() = Member(kLive, "http://127.0.0.1:7001");
    *table->add_members() = Member(kStarted, "http://127.0.0.1:7002");
    v1::ClusterMember* removed = table->add_members();
    *removed = Member(kRemoved, "http://127.0.0.1:7003");
    removed->set_removed(true);
    v1::ClusterMember* learner = table->add_members();
    *learner = Member(kLearner, "http://127.0.0.1:7004");
    learner->set_is_learner(true);
    REQUIRE(store->ReplaceMemberTable(std::move(table)).ok());
    // kStarted publishes its name and client URLs, as a member does once it runs.
    KvStateMachine machine(*store);
    v1::InternalRequest publish;
    publish.set_request_id(1);
    publish.mutable_member_attributes()->set_id(kStarted);
    publish.mutable_member_attributes()->set_name("n2");
    publish.mutable_member_attributes()->add_client_urls("http://127.0.0.1:7102");
    const raft::Entry entry{Term(2), LogIndex(2), raft::EntryType::kNormal,
                            publish.SerializeAsString()};
    std::vector<ApplyOutcome> out = machine.Apply(std::span(&entry, 1));
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].status.ok());
  }

  raftpb::JoinResponse Join(const std::string& url) const {
    raftpb::JoinRequest request;
    request.set_name("new");
    request.add_peer_urls(url);
    return AnswerJoin(config, *store, request);
  }
  raftpb::JoinResponse Probe(std::uint64_t id) const {
    raftpb::JoinRequest request;
    request.set_name("probing");
    request.set_member_id(id);
    return AnswerJoin(config, *store, request);
  }
};

TEST_CASE("AnswerJoin: a member added and never started learns its IDs and the live members",
          "[server][daemon][membership]") {
  Fixture f;
  // The same address written differently (no scheme) still names it.
  const raftpb::JoinResponse answer = f.Join("127.0.0.1:7001");
  CHECK(answer.refusal() == raftpb::JoinResponse::NONE);
  CHECK(answer.cluster_id() == f.config.cluster_id());
  CHECK(answer.member_id() == kLive);
  std::vector<std::uint64_t> ids;
  for (const raftpb::JoinMember& m : answer.members()) ids.push_back(m.id());
  CHECK(ids == std::vector<std::uint64_t>{kLive, kStarted, kLearner});  // not the removed one
  for (const raftpb::JoinMember& m : answer.members()) {
    if (m.id() == kStarted) CHECK(m.name() == "n2");  // as published
    CHECK(m.is_learner() == (m.id() == kLearner));
  }
}

TEST_CASE("AnswerJoin: refusals name what is wrong", "[server][daemon][membership]") {
  Fixture f;
  const raftpb::JoinResponse started = f.Join("http://127.0.0.1:7002");
  CHECK(started.refusal() == raftpb::JoinResponse::ALREADY_STARTED);
  CHECK_THAT(started.error(), Catch::Contains("has already been bootstrapped"));
  const raftpb::JoinResponse removed = f.Join("http://127.0.0.1:7003");
  CHECK(removed.refusal() == raftpb::JoinResponse::REMOVED);
  CHECK_THAT(removed.error(), Catch::Contains("was removed"));
  const raftpb::JoinResponse unknown = f.Join("http://127.0.0.1:7999");
  CHECK(unknown.refusal() == raftpb::JoinResponse::UNKNOWN_MEMBER);
  CHECK_THAT(unknown.error(), Catch::Contains("add it first"));
  CHECK(unknown.member_id() == 0);
}

TEST_CASE("AnswerJoin: a removal probe is answered REMOVED only from the table's record",
          "[server][daemon][membership]") {
  Fixture f;
  const raftpb::JoinResponse removed = f.Probe(kRemoved);
  CHECK(removed.refusal() == raftpb::JoinResponse::REMOVED);
  CHECK(removed.cluster_id() == f.config.cluster_id());
  CHECK(removed.member_id() == kRemoved);
  // Live, or not known here (added after this member's last apply): nothing to conclude.
  for (std::uint64_t id : {kLive, kStarted, kLearner, std::uint64_t{0xdead}}) {
    const raftpb::JoinResponse answer = f.Probe(id);
    CHECK(answer.refusal() == raftpb::JoinResponse::NONE);
    CHECK(answer.members_size() == 0);  // a probe learns nothing else
  }
}

}  // namespace
}  // namespace epoch::server
