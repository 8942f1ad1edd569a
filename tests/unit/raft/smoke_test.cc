#include <catch2/catch.hpp>

#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

TEST_CASE("three nodes elect a leader and replicate a proposal", "[raft]") {
  TestCluster c(3);
  c.BootAndElect(1);
  REQUIRE(c.node(1).role() == Role::kLeader);
  auto r = c.node(1).Propose({"a", "b"});
  REQUIRE(r.ok());
  c.Stabilize();
  for (std::uint64_t id = 1; id <= 3; ++id) {
    CHECK(AppliedData(c.at(id)) == std::vector<std::string>{"a", "b"});
    CHECK(c.node(id).commit_index() == r.last_index);
  }
}

TEST_CASE("a leader emerges from election timeouts alone", "[raft]") {
  TestCluster c(5);
  c.Run(200);
  REQUIRE(c.Leader() != kNoNode);
  int leaders = 0;
  for (NodeId id : c.ids()) leaders += c.node(id.value()).role() == Role::kLeader ? 1 : 0;
  CHECK(leaders == 1);
}

}  // namespace
}  // namespace epoch::raft::test
