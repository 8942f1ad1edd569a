// EpochNode start and shutdown in-process: shutdown must always finish. Regression: the read
// pool's threads were named by tasks waiting on a latch that lived on StartNetwork's stack; a
// task still inside arrive_and_wait() when the frame was gone waited forever, and Shutdown()
// hung joining the pool (seen once in a benchmark's cluster stop).
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "epoch/daemon/epoch_node.h"
#include "epoch/node/node_config.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::server {
namespace {

using namespace std::chrono_literals;

NodeConfig SingleNode(const std::string& dir) {
  NodeConfig c;
  c.name = "n1";
  c.data_dir = dir;
  REQUIRE(ParseInitialCluster("n1=127.0.0.61:23180", "n1=127.0.0.61:23179", &c).ok());
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

}  // namespace
}  // namespace epoch::server
