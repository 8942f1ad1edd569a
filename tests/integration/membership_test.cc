// Runtime membership through stock etcdctl: member add (learner and voter), list, update,
// promote and remove applied through the Raft log, with etcd's errors.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "epoch/etcd_errors.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/loopback.h"
#include "epoch/test_support/process.h"
#include "hostile_peer_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using test::PortBlock;

TEST_CASE("etcdctl member add, update, promote and remove a learner, with etcd's errors",
          "[integration][membership]") {
  auto cluster = StartCluster();
  Result<PortBlock> spare = PortBlock::Reserve();
  REQUIRE(spare.ok());
  const std::string url = fmt::format("http://127.0.0.1:{}", spare->port(0));
  const std::string moved = fmt::format("http://127.0.0.1:{}", spare->port(1));

  const std::string added =
      EtcdctlOk(*cluster, {"member", "add", "n4", "--learner", "--peer-urls=" + url});
  const std::string id = MemberIdIn(added, "added to cluster");
  CHECK(added.find("ETCD_NAME=\"n4\"") != std::string::npos);
  CHECK(added.find("ETCD_INITIAL_CLUSTER_STATE=\"existing\"") != std::string::npos);
  CHECK(added.find("n4=" + url) != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    CHECK(added.find(fmt::format("{}=http://127.0.0.1:{}", cluster->node(i).name,
                                 cluster->node(i).peer_port)) != std::string::npos);
  }
  std::map<std::string, std::vector<std::string>> rows = MemberRows(*cluster);
  REQUIRE(rows.size() == 4);
  CHECK(rows[id] == std::vector<std::string>{"unstarted", "", url, "", "true"});
  for (int i = 0; i < 3; ++i) CHECK(rows[Hex(cluster->node(i).member_id)][4] == "false");
  // Every member applied the change: any of them lists it.
  for (int i = 0; i < 3; ++i) {
    REQUIRE(Eventually(
        [&] {
          CommandResult r =
              cluster->Etcdctl({"member", "list"}, {}, cluster->node(i).client_address());
          return r.exit_code == 0 && Lines(r.out).size() == 4;
        },
        std::chrono::seconds(10)));
  }

  EtcdctlFails(*cluster, {"member", "add", "n5", "--learner", "--peer-urls=" + moved},
               etcd_errors::kTooManyLearners.message);
  EtcdctlFails(*cluster,
               {"member", "add", "n5",
                fmt::format("--peer-urls=http://127.0.0.1:{}", cluster->node(1).peer_port)},
               etcd_errors::kPeerUrlExist.message);
  // Never started, so never in sync; a voter cannot be promoted.
  EtcdctlFails(*cluster, {"member", "promote", id}, etcd_errors::kLearnerNotReady.message);
  EtcdctlFails(*cluster, {"member", "promote", Hex(cluster->node(0).member_id)},
               etcd_errors::kMemberNotLearner.message);

  const std::string updated = EtcdctlOk(*cluster, {"member", "update", id, "--peer-urls=" + moved});
  CHECK(MemberIdIn(updated, "updated in cluster") == id);
  CHECK(MemberRows(*cluster)[id][2] == moved);

  const std::string removed = EtcdctlOk(*cluster, {"member", "remove", id});
  CHECK(MemberIdIn(removed, "removed from cluster") == id);
  CHECK(MemberRows(*cluster).size() == 3);
  EtcdctlFails(*cluster, {"member", "remove", id}, etcd_errors::kMemberNotFound.message);
  EtcdctlFails(*cluster, {"member", "update", id, "--peer-urls=" + moved},
               etcd_errors::kMemberNotFound.message);
  // A removed learner's slot is free again, and the cluster still serves everywhere.
  EtcdctlOk(*cluster, {"member", "add", "n4", "--learner", "--peer-urls=" + url});
  for (int i = 0; i < 3; ++i) RequireServing(*cluster, i, "after/learner");
}

TEST_CASE("etcdctl member add of voters and --strict-reconfig-check's refusal",
          "[integration][membership]") {
  auto cluster = StartCluster();
  AwaitAllStarted(*cluster);
  Result<PortBlock> spare = PortBlock::Reserve();
  REQUIRE(spare.ok());
  auto peer_url = [&](int i) { return fmt::format("http://127.0.0.1:{}", spare->port(i)); };

  // Four voters, three started: a quorum (3) of them has started.
  const std::string n4 =
      MemberIdIn(EtcdctlOk(*cluster, {"member", "add", "n4", "--peer-urls=" + peer_url(0)}),
                 "added to cluster");
  CHECK(MemberRows(*cluster)[n4] ==
        std::vector<std::string>{"unstarted", "", peer_url(0), "", "false"});
  // Writes need three of the four voters: the three running ones.
  for (int i = 0; i < 3; ++i) RequireServing(*cluster, i, "after/n4");
  // Five voters, three started: still a quorum.
  const std::string n5 =
      MemberIdIn(EtcdctlOk(*cluster, {"member", "add", "n5", "--peer-urls=" + peer_url(1)}),
                 "added to cluster");
  CHECK(MemberRows(*cluster).size() == 5);
  // Removing a started voter would leave two started of four.
  EtcdctlFails(*cluster, {"member", "remove", Hex(cluster->node(2).member_id)},
               etcd_errors::kMemberNotEnoughStarted.message);
  // Removing the unstarted ones is fine, and the three go on alone.
  EtcdctlOk(*cluster, {"member", "remove", n5});
  EtcdctlOk(*cluster, {"member", "remove", n4});
  CHECK(MemberRows(*cluster).size() == 3);
  for (int i = 0; i < 3; ++i) RequireServing(*cluster, i, "after/shrink");
}

}  // namespace
}  // namespace epoch::integration

namespace epoch::integration {
namespace {

// A member started outside the TestCluster: the one `etcdctl member add` made room for.
struct ExtraMember {
  std::string name;
  std::string data_dir;
  std::string log_path;
  std::uint16_t client_port = 0;
  std::uint16_t peer_port = 0;
  test::ChildProcess process;

  [[nodiscard]] std::string client_address() const {
    return fmt::format("127.0.0.1:{}", client_port);
  }
  [[nodiscard]] std::string peer_url() const {
    return fmt::format("http://127.0.0.1:{}", peer_port);
  }
};

// Starts `m` with etcd's flags and the --initial-cluster etcdctl member add printed.
void StartExtra(const TestCluster& cluster, ExtraMember& m, const std::string& initial_cluster,
                const std::vector<std::string>& flags = {}) {
  std::vector<std::string> argv = {EPOCHD_PATH,
                                   "--name",
                                   m.name,
                                   "--data-dir",
                                   m.data_dir,
                                   "--listen-client-urls",
                                   "http://" + m.client_address(),
                                   "--advertise-client-urls",
                                   "http://" + m.client_address(),
                                   "--listen-peer-urls",
                                   m.peer_url(),
                                   "--initial-advertise-peer-urls",
                                   m.peer_url(),
                                   "--initial-cluster",
                                   initial_cluster,
                                   "--initial-cluster-state",
                                   "existing",
                                   "--initial-cluster-token",
                                   cluster.cluster_token()};
  for (const std::string& f : test::ClusterOptions{}.extra_flags) argv.push_back(f);
  argv.insert(argv.end(), flags.begin(), flags.end());
  Result<test::ChildProcess> p = test::ChildProcess::Spawn(argv, m.log_path);
  REQUIRE(p.ok());
  m.process = std::move(*p);
}

// `endpoint hashkv` on `endpoints`: one hash per endpoint.
std::set<std::string> HashKvs(const TestCluster& cluster, const std::string& endpoints) {
  std::set<std::string> hashes;
  std::vector<std::string> lines = Lines(EtcdctlOk(cluster, {"endpoint", "hashkv"}, {}, endpoints));
  for (const std::string& line : lines) {
    std::vector<std::string> f = Fields(line);
    REQUIRE(f.size() == 2);
    hashes.insert(f[1]);
  }
  CHECK(lines.size() == 3);
  return hashes;
}

TEST_CASE("a learner joins with --initial-cluster-state existing, is promoted, the leader leaves",
          "[integration][membership]") {
  auto cluster = StartCluster();
  std::vector<std::string> acknowledged;
  auto put = [&](const std::string& key, const std::optional<std::string>& endpoint) {
    EtcdctlOk(*cluster, {"put", key, "v-" + key}, {}, endpoint);
    acknowledged.push_back(key);
  };
  for (int i = 0; i < 50; ++i) put(fmt::format("before/{:03}", i), std::nullopt);

  Result<PortBlock> ports = PortBlock::Reserve();
  REQUIRE(ports.ok());
  ExtraMember n4{"n4",           cluster->dir() + "/n4", cluster->dir() + "/n4.log",
                 ports->port(0), ports->port(1),         {}};
  const std::string added =
      EtcdctlOk(*cluster, {"member", "add", "n4", "--learner", "--peer-urls=" + n4.peer_url()});
  const std::string id = MemberIdIn(added, "added to cluster");
  CHECK(EnvValue(added, "ETCD_INITIAL_CLUSTER_STATE") == "existing");
  StartExtra(*cluster, n4, EnvValue(added, "ETCD_INITIAL_CLUSTER"));

  // It catches up from the leader's snapshot and serves what was written before it joined.
  REQUIRE(Eventually(
      [&] {
        CommandResult r =
            cluster->Etcdctl({"get", "before/049", "--consistency=s"}, {}, n4.client_address());
        return r.exit_code == 0 && r.out.find("v-before/049") != std::string::npos;
      },
      std::chrono::seconds(30)));
  INFO(ReadFileIfExists(n4.log_path));
  CHECK(MemberRows(*cluster)[id] == std::vector<std::string>{"started", "n4", n4.peer_url(),
                                                             "http://" + n4.client_address(),
                                                             "true"});
  for (int i = 0; i < 20; ++i) put(fmt::format("learner/{:03}", i), std::nullopt);

  // Promoted once in sync.
  REQUIRE(Eventually(
      [&] {
        return cluster->Etcdctl({"member", "promote", id}).exit_code == 0;
      },
      std::chrono::seconds(20)));
  CHECK(MemberRows(*cluster)[id][4] == "false");

  // The old leader leaves: it hands over, applies its removal and exits 1.
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  std::vector<int> rest;
  for (int i = 0; i < 3; ++i) {
    if (i != *leader) rest.push_back(i);
  }
  const std::string survivors = cluster->Endpoints(rest) + "," + n4.client_address();
  CommandResult removal =
      cluster->Etcdctl({"member", "remove", Hex(cluster->node(*leader).member_id)}, {},
                       cluster->node(rest[0]).client_address());
  INFO(removal.Describe());
  // Sent through a follower: the answer comes from the leader that just removed itself.
  REQUIRE(removal.exit_code == 0);
  REQUIRE(Eventually(
      [&] {
        CommandResult r = cluster->Etcdctl({"member", "list"}, {}, survivors);
        return r.exit_code == 0 && Lines(r.out).size() == 3 &&
               r.out.find(Hex(cluster->node(*leader).member_id)) == std::string::npos;
      },
      std::chrono::seconds(20)));
  REQUIRE(Eventually([&] { return !cluster->IsRunning(*leader); }, std::chrono::seconds(20)));
  CHECK(cluster->ExitStatus(*leader) == 1);
  // It handed leadership over (a TimeoutNow, taken although its sender had just left the
  // configuration) instead of leaving the rest to wait out an election timeout: to one of the
  // two others, or to n4, a voter now.
  std::vector<std::string> logs = {ReadFileIfExists(n4.log_path)};
  for (int i : rest) logs.push_back(ReadFileIfExists(cluster->node(i).log_path));
  CHECK(std::any_of(logs.begin(), logs.end(), [](const std::string& log) {
    return log.find("TimeoutNow from") != std::string::npos;
  }));

  // The three go on: writes through each of them, then every acknowledged write everywhere.
  for (int i = 0; i < 10; ++i) put(fmt::format("after/{:03}", i), n4.client_address());
  for (int i = 0; i < 10; ++i) {
    put(fmt::format("after2/{:03}", i), cluster->node(rest[0]).client_address());
  }
  for (const std::string& endpoint :
       {cluster->node(rest[0]).client_address(), cluster->node(rest[1]).client_address(),
        n4.client_address()}) {
    REQUIRE(Eventually(
        [&] {
          CommandResult r = cluster->Etcdctl(
              {"get", "", "--prefix", "--keys-only", "--consistency=s"}, {}, endpoint);
          return r.exit_code == 0 && Lines(r.out).size() == acknowledged.size();
        },
        std::chrono::seconds(20)));
    std::vector<std::string> keys = Lines(EtcdctlOk(
        *cluster, {"get", "", "--prefix", "--keys-only", "--consistency=s"}, {}, endpoint));
    std::sort(acknowledged.begin(), acknowledged.end());
    CHECK(keys == acknowledged);
  }
  CHECK(HashKvs(*cluster, survivors).size() == 1);
}

}  // namespace
}  // namespace epoch::integration

namespace epoch::integration {
namespace {

TEST_CASE("a wiped member restarted under its old name is refused, the cluster unaffected",
          "[integration][membership]") {
  auto cluster = StartCluster();
  for (int i = 0; i < 5; ++i) EtcdctlOk(*cluster, {"put", fmt::format("k{}", i), "v"});
  cluster->Kill(2);
  std::filesystem::remove_all(cluster->node(2).data_dir);
  REQUIRE(cluster->StartNode(2).ok());
  REQUIRE(Eventually([&] { return !cluster->IsRunning(2); }, std::chrono::seconds(20)));
  CHECK(cluster->ExitStatus(2) == 1);
  CHECK_THAT(cluster->LogTail(2),
             Catch::Contains(fmt::format("member {} has already been bootstrapped",
                                         Hex(cluster->node(2).member_id))));
  // The two left serve writes (CheckAlive would report the refused member).
  for (int i = 0; i < 2; ++i) {
    EtcdctlOk(*cluster, {"put", fmt::format("after/wiped/{}", i), "v"}, {},
              cluster->node(i).client_address());
  }
}

TEST_CASE("a removed member exits 1, and again when restarted", "[integration][membership]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int victim = (*leader + 1) % 3;
  EtcdctlOk(*cluster, {"member", "remove", Hex(cluster->node(victim).member_id)}, {},
            cluster->node(*leader).client_address());
  REQUIRE(Eventually([&] { return !cluster->IsRunning(victim); }, std::chrono::seconds(20)));
  CHECK(cluster->ExitStatus(victim) == 1);
  CHECK_THAT(cluster->LogTail(victim), Catch::Contains("was removed from the cluster"));
  REQUIRE(cluster->StartNode(victim).ok());
  REQUIRE(Eventually([&] { return !cluster->IsRunning(victim); }, std::chrono::seconds(20)));
  CHECK(cluster->ExitStatus(victim) == 1);
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    EtcdctlOk(*cluster, {"put", fmt::format("after/removed/{}", i), "v"}, {},
              cluster->node(i).client_address());
  }
}

// The leader stops replicating to a member once it applies the member's removal, so a member that
// missed it may never apply it: it learns it from its peers (RemovalProbe). A paused member may
// still get the commit (a heartbeat sent before the leader applied it): either way it exits 1.
void CheckExitsRemoved(TestCluster& cluster, int victim, bool told_by_peers) {
  REQUIRE(Eventually([&] { return !cluster.IsRunning(victim); }, std::chrono::seconds(30)));
  CHECK(cluster.ExitStatus(victim) == 1);
  const std::string log = cluster.LogTail(victim, 16384);
  if (told_by_peers) {
    CHECK_THAT(log, Catch::Contains(fmt::format("member {} was removed from cluster",
                                                Hex(cluster.node(victim).member_id))));
  }
  CHECK_THAT(log, Catch::Contains("was removed from the cluster: stopping"));
  for (int i = 0; i < 3; ++i) {
    if (i == victim) continue;
    EtcdctlOk(cluster, {"put", fmt::format("after/removal/{}", i), "v"}, {},
              cluster.node(i).client_address());
  }
}

TEST_CASE("a member removed while it was paused exits 1 once resumed",
          "[integration][membership]") {
  auto cluster = StartCluster();
  AwaitAllStarted(*cluster);
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int victim = (*leader + 1) % 3;
  cluster->Pause(victim);
  EtcdctlOk(*cluster, {"member", "remove", Hex(cluster->node(victim).member_id)}, {},
            cluster->node(*leader).client_address());
  for (int i = 0; i < 5; ++i) {
    EtcdctlOk(*cluster, {"put", fmt::format("k{}", i), "v"}, {},
              cluster->node(*leader).client_address());
  }
  cluster->Resume(victim);
  CheckExitsRemoved(*cluster, victim, /*told_by_peers=*/false);
}

TEST_CASE("a member removed while it was down learns it from its peers once restarted",
          "[integration][membership]") {
  auto cluster = StartCluster();
  AwaitAllStarted(*cluster);
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int victim = (*leader + 1) % 3;
  cluster->Kill(victim);
  EtcdctlOk(*cluster, {"member", "remove", Hex(cluster->node(victim).member_id)}, {},
            cluster->node(*leader).client_address());
  REQUIRE(cluster->StartNode(victim).ok());
  CheckExitsRemoved(*cluster, victim, /*told_by_peers=*/true);
}

TEST_CASE(
    "peer mTLS: a member added at runtime joins over TLS; another member's certificate "
    "cannot join or pose as it",
    "[integration][membership][peer_tls]") {
  hostile::Pki pki;
  pki.Issue("n4", "n4");
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = 3;
  options.node_flags = [&](int index, const std::vector<test::NodeInfo>& nodes) {
    return pki.PeerFlags(nodes.at(index).name);
  };
  auto started = TestCluster::Start(options);
  INFO("starting the cluster: " << started.status().ToString());
  REQUIRE(started.ok());
  ClusterPtr cluster(started->release());
  REQUIRE(cluster->WaitHealthy(std::chrono::seconds(20)).ok());
  for (int i = 0; i < 20; ++i) EtcdctlOk(*cluster, {"put", fmt::format("before/{:03}", i), "v"});

  Result<PortBlock> ports = PortBlock::Reserve();
  REQUIRE(ports.ok());
  ExtraMember n4{"n4",           cluster->dir() + "/n4", cluster->dir() + "/n4.log",
                 ports->port(0), ports->port(1),         {}};
  const std::string added =
      EtcdctlOk(*cluster, {"member", "add", "n4", "--learner", "--peer-urls=" + n4.peer_url()});
  const std::string id = MemberIdIn(added, "added to cluster");

  // With n1's certificate the join is refused (it names n1, not n4) and counted.
  std::uint64_t refused_before = 0;
  for (int i = 0; i < 3; ++i) {
    refused_before += hostile::ConnectionsRefused(*cluster, i, "cert_member_mismatch");
  }
  ExtraMember impostor{"n4",
                       cluster->dir() + "/impostor",
                       cluster->dir() + "/impostor.log",
                       ports->port(0),
                       ports->port(1),
                       {}};
  StartExtra(*cluster, impostor, EnvValue(added, "ETCD_INITIAL_CLUSTER"), pki.PeerFlags("n1"));
  REQUIRE(Eventually(
      [&] {
        std::uint64_t refused = 0;
        for (int i = 0; i < 3; ++i) {
          refused += hostile::ConnectionsRefused(*cluster, i, "cert_member_mismatch");
        }
        return refused > refused_before;
      },
      std::chrono::seconds(20)));
  impostor.process.KillAndReap();
  CHECK(MemberRows(*cluster)[id][0] == "unstarted");

  // With its own certificate it joins, catches up from a snapshot and is promoted.
  StartExtra(*cluster, n4, EnvValue(added, "ETCD_INITIAL_CLUSTER"), pki.PeerFlags("n4"));
  INFO(ReadFileIfExists(n4.log_path));
  REQUIRE(Eventually(
      [&] {
        CommandResult r =
            cluster->Etcdctl({"get", "before/019", "--consistency=s"}, {}, n4.client_address());
        return r.exit_code == 0 && r.out.find("before/019") != std::string::npos;
      },
      std::chrono::seconds(30)));
  CHECK(MemberRows(*cluster)[id][1] == "n4");
  REQUIRE(Eventually(
      [&] {
        return cluster->Etcdctl({"member", "promote", id}).exit_code == 0;
      },
      std::chrono::seconds(20)));
  EtcdctlOk(*cluster, {"put", "after/promote", "v"}, {}, n4.client_address());
  REQUIRE(Eventually(
      [&] {
        CommandResult r =
            cluster->Etcdctl({"get", "after/promote", "--consistency=s"}, {}, n4.client_address());
        return r.exit_code == 0 && r.out.find("after/promote") != std::string::npos;
      },
      std::chrono::seconds(10)));
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
