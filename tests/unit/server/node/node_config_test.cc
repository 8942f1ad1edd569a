#include "epoch/node/node_config.h"

#include <catch2/catch.hpp>

namespace epoch::server {
namespace {

NodeConfig ThreeNodes(const std::string& name = "n1") {
  NodeConfig c;
  c.name = name;
  c.data_dir = "/tmp/x";
  REQUIRE(ParseInitialCluster("n1=127.0.0.1:2380,n2=127.0.0.1:2381,n3=127.0.0.1:2382",
                              "n1=127.0.0.1:2379,n2=127.0.0.1:2389,n3=127.0.0.1:2399", &c)
              .ok());
  c.raft.id = MemberIdFor(c.cluster_token, c.name);
  return c;
}

TEST_CASE("host:port parsing accepts etcd-style URLs and rejects junk", "[server][config]") {
  CHECK(ParseHostPort("127.0.0.1:2379")->port == 2379);
  CHECK(ParseHostPort("http://localhost:2380")->host == "localhost");
  CHECK_FALSE(ParseHostPort("127.0.0.1").ok());
  CHECK_FALSE(ParseHostPort("127.0.0.1:99999").ok());
  CHECK_FALSE(ParseHostPort("127.0.0.1:12ab").ok());
  CHECK(ParseHostPort(":80").status().message().find("is not host:port") != std::string::npos);
}

TEST_CASE("member IDs are deterministic, distinct and depend on the token", "[server][config]") {
  CHECK(MemberIdFor("t", "n1") == MemberIdFor("t", "n1"));
  CHECK(MemberIdFor("t", "n1") != MemberIdFor("t", "n2"));
  CHECK(MemberIdFor("t", "n1") != MemberIdFor("u", "n1"));
  CHECK_FALSE(MemberIdFor("t", "n1").IsZero());
}

TEST_CASE("a valid three-node configuration passes", "[server][config]") {
  NodeConfig c = ThreeNodes();
  CHECK(c.Validate().ok());
  CHECK(c.members.size() == 3);
  CHECK(c.FindMember(c.self_id())->name == "n1");
  CHECK(ThreeNodes("n2").cluster_id() == c.cluster_id());  // every member agrees
}

TEST_CASE("clusters with the same names and token on other addresses have other IDs",
          "[server][config]") {
  NodeConfig a;
  NodeConfig b;
  REQUIRE(ParseInitialCluster("n1=127.0.0.1:2380,n2=127.0.0.1:2381", "", &a).ok());
  REQUIRE(ParseInitialCluster("n1=127.0.0.1:3380,n2=127.0.0.1:3381", "", &b).ok());
  CHECK(a.members[0].id == b.members[0].id);  // the same member IDs ...
  CHECK(a.cluster_id() != b.cluster_id());    // ... but not the same cluster
  NodeConfig a_again;
  REQUIRE(ParseInitialCluster("n2=127.0.0.1:2381,n1=127.0.0.1:2380", "", &a_again).ok());
  CHECK(a_again.cluster_id() == a.cluster_id());  // the order of the flag does not matter
}

TEST_CASE("configuration errors name the flag to fix", "[server][config]") {
  NodeConfig c = ThreeNodes("n9");
  CHECK(c.Validate().message().find("--name 'n9' is not a member") != std::string::npos);

  NodeConfig missing;
  Status s = ParseInitialCluster("n1=127.0.0.1:1,n2=127.0.0.1:2", "n1=127.0.0.1:3", &missing);
  CHECK(s.message().find("'n2' is in --initial-cluster but not in --initial-cluster-clients") !=
        std::string::npos);
  CHECK(ParseInitialCluster("n1", "n1=127.0.0.1:3", &missing).message().find("name=host:port") !=
        std::string::npos);
  CHECK_FALSE(
      ParseInitialCluster("n1=127.0.0.1:1,n1=127.0.0.1:2", "n1=127.0.0.1:3", &missing).ok());

  NodeConfig dup = ThreeNodes();
  dup.members[1].client = dup.members[0].peer;
  CHECK(dup.Validate().message().find("used twice") != std::string::npos);

  NodeConfig timing = ThreeNodes();
  timing.raft.heartbeat_ticks = 50;  // slower than the election floor
  Status t = timing.Validate();
  CHECK(t.Is(StatusCode::kInvalidArgument));
  CHECK(t.message().find("raft timing") == 0);

  NodeConfig tick = ThreeNodes();
  tick.tick = std::chrono::milliseconds(0);
  CHECK(tick.Validate().message().find("--tick-ms") != std::string::npos);
}

}  // namespace
}  // namespace epoch::server
