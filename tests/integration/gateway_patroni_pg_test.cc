// Real Patroni (Debian's, etcd3 DCS over the HTTP/JSON gateway) runs two local PostgreSQL 15
// instances through a 3-member Epoch cluster: it elects a primary, streams to the replica, and
// when the primary's host is killed (its Patroni and all its postgres processes, SIGKILL) promotes
// the replica once the dead leader's lease expires. An independent checker samples both instances
// every 150 ms for the whole run and fails on any sample with two primaries; the leader key in
// Epoch must name the primary, and a row written before the kill must be on the new primary
// (gateway/patroni_pg.py, which states its bounds).
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "gateway_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

// A block of loopback ports clear of bench/kv/compare.sh's fixed ones (22379-22400), which a
// benchmark on the same machine may bind at any moment.
test::PortBlock ReservePortsClearOfBenchmark() {
  std::vector<test::PortBlock> skipped;  // held until the search ends, so Reserve moves on
  for (int attempt = 0; attempt < 8; ++attempt) {
    Result<test::PortBlock> block = test::PortBlock::Reserve();
    REQUIRE(block.ok());
    const bool clashes =
        block->port(0) <= 22400 && block->port(test::PortBlock::kPorts - 1) >= 22379;
    if (!clashes) return std::move(*block);
    skipped.push_back(std::move(*block));
  }
  FAIL("no port block clear of 22379-22400");
  return {};
}

TEST_CASE(
    "gateway: Patroni fails a PostgreSQL primary over through Epoch with one primary at a time",
    "[gateway][patroni]") {
  ClusterPtr cluster = StartCluster(3);
  std::string hosts;
  for (int i = 0; i < cluster->size(); ++i) {
    hosts += (i > 0 ? "," : "") + cluster->node(i).client_address();
  }
  // Patroni's REST API and PostgreSQL ports of members pg0 and pg1.
  const test::PortBlock ports = ReservePortsClearOfBenchmark();
  const std::string member_ports =
      fmt::format("{},{},{},{}", ports.port(0), ports.port(1), ports.port(2), ports.port(3));
  // The script's own bounds end it well within this; the timeout only catches a hang.
  const test::CommandResult r =
      test::RunCommand({"/usr/bin/python3", EPOCH_PATRONI_PG_SCRIPT, hosts, member_ports}, {},
                       std::chrono::seconds(180));
  INFO(r.Describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("two_primary_samples=0") != std::string::npos);
  CHECK(r.out.find("\nok\n") != std::string::npos);
  for (const std::string& line : Lines(r.out)) {
    if (line.starts_with("samples=")) fmt::print("patroni failover: {}\n", line);
  }
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
