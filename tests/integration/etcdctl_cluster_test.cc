// etcdctl's cluster commands against a real cluster: endpoint status, endpoint health,
// member list, move-leader — and the Maintenance errors etcdctl relies on. Membership changes
// are in membership_test.cc.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

struct EndpointStatus {
  std::string endpoint;
  std::string id;
  bool is_leader = false;
  std::uint64_t raft_term = 0;
  std::uint64_t raft_index = 0;
  std::uint64_t raft_applied_index = 0;
  std::string errors;
};

// Simple output: "endpoint, ID, version, db size, is leader, is learner, raft term, raft index,
// raft applied index, errors".
std::vector<EndpointStatus> ParseEndpointStatus(const std::string& out) {
  std::vector<EndpointStatus> rows;
  for (const std::string& line : Lines(out)) {
    std::vector<std::string> f = Fields(line);
    INFO("endpoint status line: " << line);
    REQUIRE(f.size() == 10);
    CHECK((f[4] == "true" || f[4] == "false"));
    CHECK(f[5] == "false");
    rows.push_back({f[0], f[1], f[4] == "true", std::stoull(f[6]), std::stoull(f[7]),
                    std::stoull(f[8]), f[9]});
  }
  return rows;
}

TEST_CASE("etcdctl endpoint status names one leader and agrees on term and index",
          "[integration][etcdctl][cluster]") {
  auto cluster = StartCluster();
  for (int i = 0; i < 5; ++i) EtcdctlOk(*cluster, {"put", fmt::format("k{}", i), "v"});
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());

  std::vector<EndpointStatus> rows =
      ParseEndpointStatus(EtcdctlOk(*cluster, {"endpoint", "status"}));
  REQUIRE(rows.size() == 3);
  std::set<std::string> ids;
  int leaders = 0;
  for (int i = 0; i < 3; ++i) {
    const EndpointStatus& r = rows[static_cast<std::size_t>(i)];
    CHECK(r.endpoint == cluster->node(i).client_address());
    CHECK(r.id == Hex(cluster->node(i).member_id));
    ids.insert(r.id);
    if (r.is_leader) {
      ++leaders;
      CHECK(r.id == Hex(cluster->node(*leader).member_id));
    }
    CHECK(r.raft_term == rows[0].raft_term);
    CHECK(r.raft_term >= 2);   // the bootstrap term is 1; an election happened
    CHECK(r.raft_index >= 7);  // the leader's no-op and five puts after the bootstrap entry
    CHECK(r.raft_applied_index <= r.raft_index);
    CHECK(r.errors.empty());
  }
  CHECK(leaders == 1);
  CHECK(ids.size() == 3);

  // -w json: the leader field is the leader's member ID on every endpoint.
  std::string json = EtcdctlOk(*cluster, {"endpoint", "status", "-w", "json"});
  CHECK(json.find(fmt::format("\"leader\":{}", cluster->node(*leader).member_id)) !=
        std::string::npos);
}

TEST_CASE("etcdctl endpoint health: healthy members, and the dead one reported",
          "[integration][etcdctl][cluster]") {
  auto cluster = StartCluster();
  CommandResult healthy = cluster->Etcdctl({"endpoint", "health"});
  INFO(healthy.Describe());
  CHECK(healthy.exit_code == 0);
  std::string all = healthy.out + healthy.err;  // 3.4 prints health lines to stderr
  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(all.find(fmt::format("{} is healthy: successfully committed proposal",
                               cluster->node(i).client_address())) != std::string::npos);
  }

  // One member down: the other two stay healthy (quorum holds), the dead one is reported.
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  int victim = (*leader + 1) % cluster->size();
  cluster->Kill(victim);
  CommandResult partial = cluster->Etcdctl({"endpoint", "health"});
  INFO(partial.Describe());
  CHECK(partial.exit_code != 0);
  std::string text = partial.out + partial.err;
  CHECK(text.find(fmt::format("{} is unhealthy", cluster->node(victim).client_address())) !=
        std::string::npos);
  for (int i = 0; i < cluster->size(); ++i) {
    if (i == victim) continue;
    CHECK(text.find(fmt::format("{} is healthy", cluster->node(i).client_address())) !=
          std::string::npos);
  }
}

TEST_CASE("etcdctl member list shows every member with its URLs",
          "[integration][etcdctl][cluster]") {
  auto cluster = StartCluster();
  std::vector<std::string> lines = Lines(EtcdctlOk(*cluster, {"member", "list"}));
  REQUIRE(lines.size() == 3);
  // Sorted by member ID, as etcd lists them.
  std::vector<int> by_id = {0, 1, 2};
  std::sort(by_id.begin(), by_id.end(),
            [&](int a, int b) { return cluster->node(a).member_id < cluster->node(b).member_id; });
  for (int i = 0; i < 3; ++i) {
    const test::NodeInfo& n = cluster->node(by_id[static_cast<std::size_t>(i)]);
    std::vector<std::string> expected = {Hex(n.member_id),
                                         "started",
                                         n.name,
                                         fmt::format("http://127.0.0.1:{}", n.peer_port),
                                         fmt::format("http://127.0.0.1:{}", n.client_port),
                                         "false"};
    CHECK(Fields(lines[static_cast<std::size_t>(i)]) == expected);
  }
  // Any member answers the same list.
  CHECK(Lines(EtcdctlOk(*cluster, {"member", "list"}, {}, cluster->node(2).client_address())) ==
        lines);
}

grpc::Status MoveLeader(TestCluster& cluster, int via, std::uint64_t target) {
  auto stub = etcdserverpb::Maintenance::NewStub(cluster.Channel(via));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  etcdserverpb::MoveLeaderRequest request;
  request.set_targetid(target);
  etcdserverpb::MoveLeaderResponse response;
  return stub->MoveLeader(&ctx, request, &response);
}

TEST_CASE("etcdctl move-leader moves leadership, non-leaders and bad targets are refused",
          "[integration][etcdctl][cluster]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  int target = (*leader + 1) % cluster->size();
  int other = (*leader + 2) % cluster->size();

  std::string out = EtcdctlOk(*cluster, {"move-leader", Hex(cluster->node(target).member_id)});
  CHECK(out == fmt::format("Leadership transferred from {} to {}\n",
                           Hex(cluster->node(*leader).member_id),
                           Hex(cluster->node(target).member_id)));
  Result<int> moved = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(moved.ok());
  CHECK(*moved == target);
  // The old leader is alive and still serving after handing over.
  RequireServing(*cluster, *leader, "after/move");

  // etcdctl itself finds no leader among follower-only endpoints.
  EtcdctlFails(*cluster, {"move-leader", Hex(cluster->node(other).member_id)},
               "no leader endpoint given", {}, cluster->node(other).client_address());
  // The server: a follower answers "not leader", an unknown target is a bad transferee.
  grpc::Status not_leader = MoveLeader(*cluster, other, cluster->node(*leader).member_id);
  CHECK(not_leader.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(not_leader.error_message() == epoch::etcd_errors::kNotLeader.message);
  grpc::Status bad = MoveLeader(*cluster, target, 0x1234);
  CHECK(bad.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(bad.error_message() == epoch::etcd_errors::kBadLeaderTransferee.message);

  // And back again through the gRPC call, then writes still work everywhere.
  grpc::Status back = MoveLeader(*cluster, target, cluster->node(*leader).member_id);
  INFO(back.error_message());
  CHECK(back.ok());
  Result<int> returned = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(returned.ok());
  CHECK(*returned == *leader);
  for (int i = 0; i < cluster->size(); ++i) RequireServing(*cluster, i, "after/move-back");
}

}  // namespace
}  // namespace epoch::integration
