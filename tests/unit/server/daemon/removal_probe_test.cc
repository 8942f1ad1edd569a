// RemovalProbe (removal_probe.h) with fake hooks, and the parts of membership it relies on:
// PeersOf (who a member hears from while its configuration lags its table) and the answer to a
// removal probe.
#include "removal_probe.h"

#include <asio.hpp>
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "epoch/test_support/eventually.h"
#include "peer_membership.h"

namespace epoch::server {
namespace {

using epoch::test_support::Eventually;
using namespace std::chrono_literals;

constexpr std::uint64_t kCluster = 0xc1;
const NodeId kSelf(0x11);

// A probe on its own timer thread and pool, with a peer that answers `answer`.
struct Fixture {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  asio::thread_pool pool{1};
  std::atomic<std::uint64_t> leader{0};
  std::atomic<int> asked{0};
  std::atomic<int> removed{0};
  std::mutex mu;
  raftpb::JoinResponse answer;       // guarded by mu
  raftpb::JoinRequest last_request;  // guarded by mu
  std::unique_ptr<RemovalProbe> probe;
  std::thread thread;

  Fixture() {
    RemovalProbeHooks hooks;
    hooks.leader = [this] { return NodeId(leader.load()); };
    hooks.peers = [] {
      return std::vector<std::pair<NodeId, HostPort>>{{NodeId(0x22), HostPort{"127.0.0.1", 1}},
                                                      {NodeId(0x33), HostPort{"127.0.0.1", 2}}};
    };
    hooks.ask = [this](NodeId, const HostPort&, const raftpb::JoinRequest& request) {
      ++asked;
      std::lock_guard lock(mu);
      last_request = request;
      return Result<raftpb::JoinResponse>(answer);
    };
    hooks.on_removed = [this] { ++removed; };
    probe = std::make_unique<RemovalProbe>(io, pool,
                                           RemovalProbeOptions{.self = kSelf,
                                                               .name = "n1",
                                                               .cluster_id = kCluster,
                                                               .check_period = 10ms,
                                                               .quiet = 50ms},
                                           std::move(hooks));
    thread = std::thread([this] { io.run(); });
  }
  ~Fixture() {
    probe->Stop();
    work.reset();
    io.stop();
    thread.join();
    pool.join();
  }
  void Answer(raftpb::JoinResponse::Refusal refusal, std::uint64_t cluster, std::uint64_t member) {
    std::lock_guard lock(mu);
    answer.set_refusal(refusal);
    answer.set_cluster_id(cluster);
    answer.set_member_id(member);
  }
};

TEST_CASE("removal probe: a member with a leader asks no one") {
  Fixture f;
  f.leader = 0x22;
  f.Answer(raftpb::JoinResponse::REMOVED, kCluster, kSelf.value());
  f.probe->Start();
  std::this_thread::sleep_for(300ms);  // many check periods, well past `quiet`
  CHECK(f.asked == 0);
  CHECK(f.removed == 0);
  CHECK(f.probe->probes() == 0);
}

TEST_CASE("removal probe: leaderless, it asks each peer and stops on a removal notice") {
  Fixture f;
  f.Answer(raftpb::JoinResponse::NONE, kCluster, kSelf.value());
  f.probe->Start();
  REQUIRE(Eventually([&] { return f.asked >= 4; }));  // two probes, both peers each
  CHECK(f.removed == 0);
  CHECK(f.probe->probes() >= 2);  // epoch_removal_probes_total
  {
    std::lock_guard lock(f.mu);
    CHECK(f.last_request.member_id() == kSelf.value());
    CHECK(f.last_request.name() == "n1");
  }
  f.Answer(raftpb::JoinResponse::REMOVED, kCluster, kSelf.value());
  REQUIRE(Eventually([&] { return f.removed == 1; }));
  const int asked = f.asked;
  std::this_thread::sleep_for(200ms);
  CHECK(f.removed == 1);  // once; no further probe
  CHECK(f.asked == asked);
}

TEST_CASE("removal probe: a notice for another cluster or member is ignored") {
  Fixture f;
  f.Answer(raftpb::JoinResponse::REMOVED, kCluster + 1, kSelf.value());
  f.probe->Start();
  REQUIRE(Eventually([&] { return f.asked >= 2; }));
  f.Answer(raftpb::JoinResponse::REMOVED, kCluster, kSelf.value() + 1);
  const int asked = f.asked;
  REQUIRE(Eventually([&] { return f.asked >= asked + 2; }));
  CHECK(f.removed == 0);
}

v1::ClusterMember Member(std::uint64_t id, bool removed = false) {
  v1::ClusterMember m;
  m.set_id(id);
  m.set_removed(removed);
  return m;
}

TEST_CASE("PeersOf: the table's live members join a lagging configuration; removed ones leave") {
  // Installed a snapshot whose index predates members 4 (a voter since) and 5 (a learner), and
  // the removal of member 2: the configuration still says {1, 2, 3}.
  raft::ConfState conf;
  conf.voters = {NodeId(1), NodeId(2), NodeId(3)};
  v1::StoredMemberTable table;
  for (std::uint64_t id : {1, 3, 4, 5}) *table.add_members() = Member(id);
  *table.add_members() = Member(2, /*removed=*/true);
  const raft::ConfState peers = PeersOf(conf, table);
  CHECK(peers.voters == std::vector<NodeId>{NodeId(1), NodeId(3)});
  CHECK(peers.learners == std::vector<NodeId>{NodeId(4), NodeId(5)});

  // Up to date: the configuration as it is.
  raft::ConfState current;
  current.voters = {NodeId(1), NodeId(3), NodeId(4)};
  current.learners = {NodeId(5)};
  const raft::ConfState same = PeersOf(current, table);
  CHECK(same.voters == current.voters);
  CHECK(same.learners == current.learners);
}

}  // namespace
}  // namespace epoch::server
