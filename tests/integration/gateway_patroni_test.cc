// Patroni (Debian's), whose etcd3 DCS speaks only etcd's HTTP/JSON gateway, elects a leader
// through a 3-member Epoch cluster: exactly one of two members holds the leader key, the other
// takes over only after the holder's lease expires (gateway/patroni_dcs.py). The same script
// passes against etcd 3.4.
#include <catch2/catch.hpp>

#include "gateway_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

TEST_CASE("gateway: Patroni's etcd3 DCS elects and fails over a leader through Epoch",
          "[gateway][patroni]") {
  ClusterPtr cluster = StartCluster(3);
  std::string hosts;
  for (int i = 0; i < cluster->size(); ++i) {
    hosts += (i > 0 ? "," : "") + cluster->node(i).client_address();
  }
  const test::CommandResult r = test::RunCommand(
      {"/usr/bin/python3", EPOCH_PATRONI_DCS_SCRIPT, hosts}, {}, std::chrono::seconds(120));
  INFO(r.Describe());
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("ok") != std::string::npos);
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
