// A write sent to a follower while the leader it knows is dead: the follower must not send it
// into a connection it does not have (that would turn it into an unknown outcome, "request timed
// out, possibly due to connection lost"), but wait for the next leader and forward it there.
#include "support.h"

namespace epoch::integration {
namespace {

TEST_CASE("a follower holds a write across the leader's death and forwards it to the next one",
          "[integration][failover]") {
  ClusterPtr cluster = StartCluster(3);
  auto leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int old_leader = *leader;
  // Neither follower has forwarded anything yet: their channels to the leader are not connected,
  // so the first forward after the kill finds the leader unreachable, deterministically.
  cluster->Kill(old_leader);
  for (int k = 1; k <= 2; ++k) {
    const int follower = (old_leader + k) % 3;
    auto kv = etcdserverpb::KV::NewStub(cluster->Channel(follower));
    const std::string key = "forwarded/" + std::to_string(follower);
    etcdserverpb::PutResponse response;
    grpc::Status s = Put(*kv, key, "v", &response, std::chrono::seconds(8));
    INFO("put through n" << follower + 1 << ": " << s.error_message());
    REQUIRE(s.ok());
    CHECK(response.header().revision() > 0);
    auto got = MustRange(*cluster, follower, key);
    REQUIRE(got.kvs_size() == 1);
    CHECK(got.kvs(0).value() == "v");
  }
  auto next = cluster->WaitForLeader(std::chrono::seconds(10), old_leader);
  REQUIRE(next.ok());
  CHECK(*next != old_leader);
}

}  // namespace
}  // namespace epoch::integration
