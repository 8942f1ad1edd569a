// A cluster started the way an etcd deployment script starts etcd — etcd's flags only, http://
// URLs, two client listeners, no --initial-cluster-clients — works with etcdctl: members learn
// each other's client URLs from their publications (member list shows them), and a lease grant
// sent to a follower reaches the leader through the URL the leader published. The same settings
// in etcd's YAML config file start the same cluster.
#include <fmt/format.h>

#include <thread>

#include "support.h"

namespace epoch::integration {
namespace {

std::string MemberListLine(const TestCluster& cluster, int i) {
  const test::NodeInfo& n = cluster.node(i);
  return fmt::format("{}, started, {}, http://127.0.0.1:{}, http://127.0.0.1:{}, false",
                     Hex(n.member_id), n.name, n.peer_port, n.client_port);
}

// Polls `etcdctl member list` until every member's line shows its client URL (up to 10 s).
std::string WaitForPublishedMembers(const TestCluster& cluster) {
  std::string out;
  for (int attempt = 0; attempt < 100; ++attempt) {
    out = EtcdctlOk(cluster, {"member", "list"});
    bool all = true;
    for (int i = 0; i < cluster.size(); ++i) {
      all = all && out.find(MemberListLine(cluster, i)) != std::string::npos;
    }
    if (all) return out;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return out;
}

// Starts a 3-member cluster with etcd's flags only (on the command line, or in each member's
// YAML config file) and checks that `member list` shows every member's published client URL.
// `members` gets that listing.
ClusterPtr StartEtcdStyle(bool yaml_config, std::string* members) {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.etcd_flags = true;
  options.yaml_config = yaml_config;
  auto started = TestCluster::Start(options);
  INFO(started.status().ToString());
  REQUIRE(started.ok());
  ClusterPtr cluster(started->release());

  *members = WaitForPublishedMembers(*cluster);
  INFO(*members);
  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(members->find(MemberListLine(*cluster, i)) != std::string::npos);
  }
  return cluster;
}

TEST_CASE("etcd's flags alone start a cluster; members publish their client URLs",
          "[integration][etcdctl][flags]") {
  std::string members;
  ClusterPtr cluster = StartEtcdStyle(/*yaml_config=*/false, &members);

  // The second client listener serves too.
  const std::string second = fmt::format("127.0.0.2:{}", cluster->node(0).client_port);
  EtcdctlOk(*cluster, {"put", "k", "v"}, {}, second);
  CHECK(EtcdctlOk(*cluster, {"get", "k", "--print-value-only"}, {}, second) == "v\n");

  // A lease grant at a follower is forwarded to the leader's published client URL.
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  const std::string at_follower = cluster->node(follower).client_address();
  CHECK(EtcdctlOk(*cluster, {"lease", "grant", "30"}, {}, at_follower).find("granted") !=
        std::string::npos);

  // After the leader restarts (and publishes again, unchanged), forwarding still works.
  cluster->Kill(*leader);
  REQUIRE(cluster->Restart(*leader).ok());
  Result<int> next = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(next.ok());
  const int other = (*next + 1) % cluster->size();
  CHECK(EtcdctlOk(*cluster, {"lease", "grant", "30"}, {}, cluster->node(other).client_address())
            .find("granted") != std::string::npos);
  CHECK(WaitForPublishedMembers(*cluster) == members);
}

TEST_CASE("an etcd YAML config file alone starts a cluster", "[integration][etcdctl][flags]") {
  std::string members;
  ClusterPtr cluster = StartEtcdStyle(/*yaml_config=*/true, &members);
  EtcdctlOk(*cluster, {"put", "from-yaml", "v"});
  CHECK(EtcdctlOk(*cluster, {"get", "from-yaml", "--print-value-only"}) == "v\n");
}

}  // namespace
}  // namespace epoch::integration
