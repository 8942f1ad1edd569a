// --force-new-cluster (etcd's disaster recovery): a 3-member cluster loses two members and their
// data; the survivor, restarted on its data directory with the flag, serves alone with every
// acknowledged write, records the others removed, grows back with a member that joins, and stays
// what it became when restarted with or without the flag.
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "support.h"

namespace epoch::integration {
namespace {

constexpr int kKeys = 60;

// The keys under "key/" through `endpoint` (linearizable), sorted.
std::vector<std::string> Keys(const TestCluster& cluster, const std::string& endpoint) {
  return Lines(EtcdctlOk(cluster, {"get", "key/", "--prefix", "--keys-only"}, {}, endpoint));
}

std::vector<std::string> Acknowledged(int count) {
  std::vector<std::string> keys;
  for (int i = 0; i < count; ++i) keys.push_back(fmt::format("key/{:03}", i));
  return keys;
}

// `endpoint hashkv` through `endpoints`: the distinct hashes.
std::set<std::string> HashKvs(const TestCluster& cluster, const std::string& endpoints) {
  std::set<std::string> hashes;
  for (const std::string& line : Lines(EtcdctlOk(cluster, {"endpoint", "hashkv"}, {}, endpoints))) {
    std::vector<std::string> f = Fields(line);
    REQUIRE(f.size() == 2);
    hashes.insert(f[1]);
  }
  return hashes;
}

// Node i, started again with its old flags, exits 1 and logs `expected`.
void RequireRefusedAsRemoved(TestCluster& cluster, int i, const std::string& expected) {
  REQUIRE(cluster.StartNode(i).ok());
  Result<int> status = cluster.AwaitExit(i, std::chrono::seconds(30));
  INFO(cluster.LogTail(i));
  REQUIRE(status.ok());
  CHECK(*status == 1);
  CHECK_THAT(cluster.LogTail(i, 16384), Catch::Contains(expected));
}

TEST_CASE("force-new-cluster: the survivor of a lost quorum serves alone and grows back",
          "[integration][membership][force_new_cluster]") {
  bool force = false;
  int survivor = -1;
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = 3;
  options.node_flags = [&](int index, const std::vector<test::NodeInfo>&) {
    return force && index == survivor ? std::vector<std::string>{"--force-new-cluster"}
                                      : std::vector<std::string>{};
  };
  auto started = TestCluster::Start(options);
  INFO("starting the cluster: " << started.status().ToString());
  REQUIRE(started.ok());
  ClusterPtr cluster(started->release());

  // 1. Acknowledged writes. The leader holds every one of them: it is the survivor.
  for (const std::string& key : Acknowledged(kKeys)) EtcdctlOk(*cluster, {"put", key, "v"});
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  survivor = *leader;
  const int wiped = (survivor + 1) % 3;
  const int stale = (survivor + 2) % 3;
  const std::string self = Hex(cluster->node(survivor).member_id);
  const std::string endpoint = cluster->node(survivor).client_address();

  // 2. Two members die with their data; one's log is kept aside to come back later.
  cluster->Kill(wiped);
  cluster->Kill(stale);
  const std::string stale_copy = cluster->dir() + "/stale-copy";
  std::filesystem::copy(cluster->node(stale).data_dir, stale_copy,
                        std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(cluster->node(wiped).data_dir);
  std::filesystem::remove_all(cluster->node(stale).data_dir);

  // 3. The survivor, killed too (its commit index on disk may lag), restarts forced.
  cluster->Kill(survivor);
  force = true;
  REQUIRE(cluster->StartNode(survivor).ok());
  Result<int> alone = cluster->WaitForLeader(std::chrono::seconds(20));
  INFO(cluster->LogTail(survivor));
  REQUIRE(alone.ok());
  CHECK(*alone == survivor);
  CHECK_THAT(cluster->LogTail(survivor, 65536), Catch::Contains("forcing restart member"));
  CHECK(Keys(*cluster, endpoint) == Acknowledged(kKeys));
  EtcdctlOk(*cluster, {"put", "key/forced", "v"}, {}, endpoint);

  // 4. One member; the others recorded removed: refused when they come back, wiped or not.
  std::map<std::string, std::vector<std::string>> rows = MemberRows(*cluster, endpoint);
  REQUIRE(rows.size() == 1);
  CHECK(rows.begin()->first == self);
  RequireRefusedAsRemoved(*cluster, wiped, "add a new member instead");
  std::filesystem::remove_all(cluster->node(stale).data_dir);
  std::filesystem::rename(stale_copy, cluster->node(stale).data_dir);
  RequireRefusedAsRemoved(
      *cluster, stale,
      fmt::format("member {} was removed from cluster", Hex(cluster->node(stale).member_id)));

  // 5. Grown back: a learner joins, catches up, is promoted; both hold the same data.
  const std::string peer_url = fmt::format("http://127.0.0.1:{}", cluster->node(wiped).peer_port);
  const std::string added = EtcdctlOk(
      *cluster, {"member", "add", "n4", "--learner", "--peer-urls=" + peer_url}, {}, endpoint);
  const std::string n4 = MemberIdIn(added, "added to cluster");
  test::JoiningMember joining{"n4", std::stoull(n4, nullptr, 16),
                              EnvValue(added, "ETCD_INITIAL_CLUSTER"), peer_url};
  REQUIRE(cluster->JoinNode(wiped, joining).ok());
  const std::string both = endpoint + "," + cluster->node(wiped).client_address();
  REQUIRE(Eventually(
      [&] {
        return cluster->Etcdctl({"member", "promote", n4}, {}, endpoint).exit_code == 0;
      },
      std::chrono::seconds(30)));
  rows = MemberRows(*cluster, endpoint);
  REQUIRE(rows.size() == 2);
  CHECK(rows[n4][4] == "false");
  EtcdctlOk(*cluster, {"put", "key/grown", "v"}, {}, endpoint);
  REQUIRE(
      Eventually([&] { return HashKvs(*cluster, both).size() == 1; }, std::chrono::seconds(20)));

  // 6. Restarted without the flag, then with it still set: the same two members and data.
  std::vector<std::string> expected = Acknowledged(kKeys);
  expected.insert(expected.end(), {"key/forced", "key/grown"});
  std::sort(expected.begin(), expected.end());
  for (bool flag : {false, true}) {
    force = flag;
    INFO("restart with --force-new-cluster: " << flag);
    REQUIRE(cluster->Restart(survivor).ok());
    REQUIRE(cluster->WaitForLeader(std::chrono::seconds(20)).ok());
    rows = MemberRows(*cluster, endpoint);
    CHECK(rows.size() == 2);
    CHECK(rows.contains(self));
    CHECK(rows.contains(n4));
    CHECK(Keys(*cluster, endpoint) == expected);
    CHECK(HashKvs(*cluster, both).size() == 1);
  }
  CHECK_THAT(cluster->LogTail(survivor, 65536), Catch::Contains("--force-new-cluster ignored"));
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
