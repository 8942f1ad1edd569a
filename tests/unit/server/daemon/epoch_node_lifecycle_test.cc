// EpochNode start and shutdown in-process: shutdown must always finish. Regression: the read
// pool's threads were named by tasks waiting on a latch that lived on StartNetwork's stack; a
// task still inside arrive_and_wait() when the frame was gone waited forever, and Shutdown()
// hung joining the pool (seen once in a benchmark's cluster stop).
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "epoch/daemon/epoch_node.h"
#include "epoch/node/node_config.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;

NodeConfig SingleNode(const std::string& dir, const std::string& peers = "n1=127.0.0.61:23180",
                      const std::string& clients = "n1=127.0.0.61:23179") {
  NodeConfig c;
  c.name = "n1";
  c.data_dir = dir;
  REQUIRE(ParseInitialCluster(peers, clients, &c).ok());
  c.listen_client = c.members[0].client;
  c.listen_peer = c.members[0].peer;
  c.raft.id = MemberIdFor(c.cluster_token, c.name);
  return c;
}

TEST_CASE("epochd in-process: every start is followed by a shutdown that finishes",
          "[server][node][lifecycle]") {
  test_support::TempDir dir("epoch-lifecycle");
  for (int i = 0; i < 15; ++i) {
    Result<std::unique_ptr<EpochNode>> node = EpochNode::Start(SingleNode(dir.path()));
    INFO("start " << i << ": " << node.status().ToString());
    REQUIRE(node.ok());
    std::shared_ptr<EpochNode> running(std::move(*node));
    auto stopped = std::make_shared<std::promise<void>>();
    std::future<void> done = stopped->get_future();
    std::thread stopper([running, stopped] {
      running->Shutdown();
      stopped->set_value();
    });
    const bool finished = done.wait_for(20s) == std::future_status::ready;
    if (!finished) {
      stopper.detach();  // hung: report it rather than hang the suite
      dir.Keep();        // the hung node may still use it
      FAIL("shutdown " << i << " did not finish within 20 s");
    }
    stopper.join();
  }
}

// The cluster ID in a write's response header, once the member has a leader.
std::uint64_t ClusterIdOf(const EpochNode& node) {
  auto channel = grpc::CreateChannel("127.0.0.61:" + std::to_string(node.client_port()),
                                     grpc::InsecureChannelCredentials());
  auto kv = etcdserverpb::KV::NewStub(channel);
  std::uint64_t id = 0;
  REQUIRE(test_support::Eventually([&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 2s);
    etcdserverpb::PutRequest put;
    put.set_key("k");
    put.set_value("v");
    etcdserverpb::PutResponse response;
    if (!kv->Put(&ctx, put, &response).ok()) return false;
    id = response.header().cluster_id();
    return true;
  }));
  return id;
}

TEST_CASE("a member keeps its data directory's cluster ID when --initial-cluster is edited",
          "[server][node][lifecycle]") {
  test_support::TempDir dir("epoch-cluster-id");
  std::uint64_t first = 0;
  {
    Result<std::unique_ptr<EpochNode>> node = EpochNode::Start(SingleNode(dir.path()));
    REQUIRE(node.ok());
    first = ClusterIdOf(**node);
    (*node)->Shutdown();
  }
  // The same member restarted with a list that names one more member (as an operator's config
  // does after a member was added): the flags alone give another ID.
  const NodeConfig edited = SingleNode(dir.path(), "n1=127.0.0.61:23180,n9=127.0.0.61:23190",
                                       "n1=127.0.0.61:23179,n9=127.0.0.61:23189");
  REQUIRE(edited.cluster_id() != first);
  Result<std::unique_ptr<EpochNode>> node = EpochNode::Start(edited);
  INFO(node.status().ToString());
  REQUIRE(node.ok());
  CHECK(ClusterIdOf(**node) == first);
  (*node)->Shutdown();
}

}  // namespace
}  // namespace epoch::server
