// Hostile peers on the plaintext peer port of a real cluster: a process that knows the cluster id
// and the member ids (both public: every response header and `member list` show them) connects
// and sends what no correct member sends. Each attack is dropped, the cluster keeps its leader
// and serves writes, and /metrics counts what was dropped (epoch_peer_frames_dropped_total and
// epoch_peer_connections_refused_total, by reason). The attacks themselves are in
// hostile_peer_support.cc; hostile_peer_tls_test.cc sends them over peer mTLS.
#include <filesystem>

#include "hostile_peer_support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;
using namespace hostile;

// A plaintext cluster with the short limits of HostileFlags, surveyed.
struct Plaintext {
  ClusterPtr cluster = StartCluster(3, HostileFlags());
  Victim v = Survey(*cluster);
};

TEST_CASE("hostile peer: a term of 2^64-1 is refused and the term never moves",
          "[integration][hostile_peer]") {
  Plaintext p;
  TermOverflow(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: a forged TimeoutNow does not unseat the leader",
          "[integration][hostile_peer]") {
  Plaintext p;
  ForgedTimeoutNow(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: forged forwarded writes and member URLs are refused",
          "[integration][hostile_peer]") {
  Plaintext p;
  ForgedForwards(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: a snapshot chunk not from the leader is refused",
          "[integration][hostile_peer]") {
  Plaintext p;
  ForgedSnapshotChunk(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: a frame for another member than the connection's is dropped",
          "[integration][hostile_peer]") {
  Plaintext p;
  FrameFromAnotherMember(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: a half-sent 64 MiB frame is cut off at the read deadline",
          "[integration][hostile_peer]") {
  Plaintext p;
  HalfSentFrame(*p.cluster, p.v, PlaintextConnector());
}

TEST_CASE("hostile peer: 1,000 idle connections are capped and the cluster keeps its leader",
          "[integration][hostile_peer]") {
  Plaintext p;
  IdleConnections(*p.cluster, p.v);
}

TEST_CASE("hostile peer: every attack while clients run; their history stays linearizable",
          "[integration][hostile_peer]") {
  Plaintext p;
  ConcurrentClients clients(*p.cluster);
  EveryAttack(*p.cluster, p.v, PlaintextConnector());
  clients.Finish();
  RequireUnharmed(*p.cluster, p.v, "probe/every-attack");
}

TEST_CASE("hostile peer: two clusters with the same names and default token refuse each other",
          "[integration][hostile_peer]") {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.cluster_token = "epoch-cluster";  // epochd's default --initial-cluster-token
  auto a = TestCluster::Start(options);
  REQUIRE(a.ok());
  auto b = TestCluster::Start(options);
  REQUIRE(b.ok());
  TestCluster& one = **a;
  TestCluster& two = **b;
  REQUIRE(one.node(1).member_id == two.node(1).member_id);  // same names, same token
  auto status_one = one.NodeStatus(1);
  auto status_two = two.NodeStatus(1);
  REQUIRE(status_one.ok());
  REQUIRE(status_two.ok());
  const std::uint64_t id_one = status_one->header().cluster_id();
  const std::uint64_t id_two = status_two->header().cluster_id();
  CHECK(id_one != id_two);
  CHECK(ReadFileIfExists(one.node(0).log_path).find("default --initial-cluster-token") !=
        std::string::npos);

  // Cluster two's n1, as its transport would introduce itself, at cluster one's n2.
  RawPeer peer(one.node(1).peer_port, "127.0.0.1");
  REQUIRE(peer.Send(Hello(id_two, two.node(0).member_id)));
  CHECK(peer.ClosedWithin(5s));
  CHECK(WaitCount([&] { return ConnectionsRefused(one, 1, "wrong_cluster"); }, 1));
  for (int i = 0; i < 3; ++i) {
    RequireServing(one, i, "probe/one");
    RequireServing(two, i, "probe/two");
  }
  CHECK(one.WaitHealthy(10s).ok());
  CHECK(two.WaitHealthy(10s).ok());
}

TEST_CASE("epochd keeps its data directory to its owner", "[integration][hostile_peer]") {
  auto cluster = StartCluster(1);
  REQUIRE(cluster->WaitHealthy(10s).ok());
  RequireServing(*cluster, 0, "probe/perms");
  namespace fs = std::filesystem;
  const fs::perms open_to_others = fs::perms::group_all | fs::perms::others_all;
  const std::string dir = cluster->node(0).data_dir;
  CHECK((fs::status(dir).permissions() & open_to_others) == fs::perms::none);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    INFO(entry.path().string());
    CHECK((entry.symlink_status().permissions() & open_to_others) == fs::perms::none);
    ++files;
  }
  CHECK(files > 3);  // the WAL and the state machine's files were checked
}

}  // namespace
}  // namespace epoch::integration
