// /metrics like etcd's, against a real 3-member cluster: served on the client port (next to gRPC)
// and on --listen-metrics-urls; `promtool check metrics` clean (but for the three gauges etcd
// itself names *_total and its compaction histograms in milliseconds); every etcd name that
// dashboards and alerts use present; the values measured (leaders, proposals, fsyncs, gRPC calls,
// peer traffic, keys, the process). The client port's HTTP side: the probes, 404, and garbage
// closed and counted.
#include <fmt/format.h>

#include <sstream>

#include "epoch/test_support/loopback.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The etcd metric names dashboards and alert rules query (docs/metrics.md).
const std::vector<std::string> kEtcdNames = {
    "etcd_server_has_leader",
    "etcd_server_is_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_proposals_pending",
    "etcd_server_proposals_failed_total",
    "etcd_server_heartbeat_send_failures_total",
    "etcd_server_slow_apply_total",
    "etcd_server_quota_backend_bytes",
    "etcd_server_version",
    "etcd_disk_wal_fsync_duration_seconds",
    "etcd_disk_backend_commit_duration_seconds",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
    "etcd_debugging_mvcc_keys_total",
    "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
    "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
    "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
    "etcd_debugging_mvcc_db_compaction_keys_total",
    "etcd_network_peer_round_trip_time_seconds",
    "etcd_network_peer_sent_bytes_total",
    "etcd_network_peer_received_bytes_total",
    "etcd_network_peer_sent_failures_total",
    "etcd_network_client_grpc_received_bytes_total",
    "etcd_network_client_grpc_sent_bytes_total",
    "grpc_server_started_total",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds",
    "grpc_server_msg_received_total",
    "grpc_server_msg_sent_total",
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
};

// What promtool's linter says about etcd's own names, which Epoch keeps as etcd defines them
// (gauges named *_total, compaction histograms in milliseconds): these lines, and no others, are
// accepted.
const std::vector<std::string> kEtcdLintFindings = {
    "etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds use base unit \"seconds\" "
    "instead of \"milliseconds\"",
    "etcd_debugging_mvcc_db_compaction_total_duration_milliseconds use base unit \"seconds\" "
    "instead of \"milliseconds\"",
    "etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds use base unit "
    "\"seconds\" instead of \"milliseconds\"",
    "etcd_debugging_mvcc_keys_total non-counter metrics should not have \"_total\" suffix",
    "etcd_server_proposals_applied_total non-counter metrics should not have \"_total\" suffix",
    "etcd_server_proposals_committed_total non-counter metrics should not have \"_total\" suffix",
};

std::string Scrape(std::uint16_t port) {
  Result<test::HttpResponse> r = test::HttpGet(port, "/metrics", seconds(5));
  INFO((r.ok() ? "" : r.status().ToString()));
  REQUIRE(r.ok());
  REQUIRE(r->code == 200);
  return r->body;
}

void RequirePromtoolClean(const std::string& page) {
  test::CommandResult check = PromtoolCheckMetrics(page);
  INFO(check.Describe());
  REQUIRE(!check.timed_out);
  REQUIRE((check.exit_code == 0 || check.exit_code == 3));  // 3: lint findings only
  std::istringstream findings(check.out + check.err);
  for (std::string line; std::getline(findings, line);) {
    if (line.empty()) continue;
    INFO(line);
    CHECK(std::find(kEtcdLintFindings.begin(), kEtcdLintFindings.end(), line) !=
          kEtcdLintFindings.end());
  }
}

TEST_CASE("/metrics: etcd's names with measured values on the client and metrics ports",
          "[integration][metrics]") {
  auto cluster = StartCluster(3);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  constexpr int kKeys = 5;
  for (int i = 0; i < kKeys; ++i) {
    EtcdctlOk(*cluster, {"put", fmt::format("metrics/k{}", i), "v"}, {},
              cluster->node(*leader).client_address());
  }
  EtcdctlOk(*cluster, {"put", "metrics/k0", "again"}, {}, cluster->node(*leader).client_address());

  // Every member applied the puts: its key count says so (a gauge of live keys, like etcd's).
  for (int i = 0; i < cluster->size(); ++i) {
    CHECK(Eventually(
        [&] {
          return SampleValue(Scrape(cluster->node(i).client_port),
                             "etcd_debugging_mvcc_keys_total") == kKeys;
        },
        seconds(10), kProcessPoll));
  }
  // The leader has timed heartbeat round trips to both followers.
  CHECK(Eventually(
      [&] {
        const std::string page = Scrape(cluster->node(*leader).client_port);
        return SampleSum(page, "etcd_network_peer_round_trip_time_seconds_count").value_or(0) >=
                   2 &&
               SampleValue(page, "etcd_network_peer_round_trip_time_seconds_count",
                           {"To=\"" +
                            fmt::format("{:x}", cluster->node((*leader + 1) % 3).member_id) + "\""})
                       .value_or(0) > 0;
      },
      seconds(10), kProcessPoll));

  double leaders = 0;
  for (int i = 0; i < cluster->size(); ++i) {
    INFO("node " << i);
    const std::string page = Scrape(cluster->node(i).client_port);
    RequirePromtoolClean(page);
    for (const std::string& name : kEtcdNames) {
      INFO(name);
      CHECK(HasMetric(page, name));
    }
    CHECK(SampleValue(page, "etcd_server_has_leader") == 1);
    leaders += SampleValue(page, "etcd_server_is_leader").value_or(0);
    CHECK(SampleValue(page, "etcd_server_proposals_committed_total").value_or(0) >= kKeys + 1);
    CHECK(SampleValue(page, "etcd_server_proposals_applied_total").value_or(0) >= kKeys + 1);
    CHECK(SampleValue(page, "etcd_disk_wal_fsync_duration_seconds_count").value_or(0) > 0);
    CHECK(SampleValue(page, "etcd_disk_backend_commit_duration_seconds_count").value_or(0) > 0);
    CHECK(SampleValue(page, "etcd_mvcc_db_total_size_in_bytes").value_or(0) > 0);
    CHECK(SampleSum(page, "etcd_network_peer_sent_bytes_total").value_or(0) > 0);
    CHECK(SampleSum(page, "etcd_network_peer_received_bytes_total").value_or(0) > 0);
    CHECK(SampleValue(page, "process_resident_memory_bytes").value_or(0) > 0);
    CHECK(SampleValue(page, "process_open_fds").value_or(0) > 0);
    CHECK(SampleValue(page, "process_cpu_seconds_total").value_or(0) > 0);
    // The histograms carry etcd's buckets.
    CHECK(SampleValue(page, "etcd_disk_wal_fsync_duration_seconds_bucket", {"le=\"8.192\""}));
    CHECK(SampleValue(page, "etcd_network_peer_round_trip_time_seconds_bucket", {"le=\"0.8192\""}));
  }
  CHECK(leaders == 1);

  // The leader answered the puts: per method and code, with the unary type.
  const std::string page = Scrape(cluster->node(*leader).client_port);
  const std::vector<std::string> put = {"grpc_method=\"Put\"", "grpc_service=\"etcdserverpb.KV\"",
                                        "grpc_type=\"unary\""};
  CHECK(SampleValue(page, "grpc_server_started_total", put).value_or(0) >= kKeys + 1);
  std::vector<std::string> put_ok = put;
  put_ok.push_back("grpc_code=\"OK\"");
  CHECK(SampleValue(page, "grpc_server_handled_total", put_ok).value_or(0) >= kKeys + 1);
  CHECK(SampleValue(page, "grpc_server_handling_seconds_count", put).value_or(0) >= kKeys + 1);
  CHECK(SampleValue(page, "etcd_network_client_grpc_received_bytes_total").value_or(0) > 0);

  // --listen-metrics-urls serves the same page.
  const std::string other = Scrape(cluster->node(*leader).metrics_port);
  CHECK(HasMetric(other, "etcd_server_has_leader"));
  CHECK(SampleValue(other, "epoch_http_requests_total", {"listener=\"metrics\""}).value_or(0) > 0);
}

TEST_CASE("Client port: the probes over HTTP/1, gRPC beside them, garbage closed and counted",
          "[integration][metrics]") {
  auto cluster = StartCluster(3);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  const std::uint16_t port = cluster->node(0).client_port;

  Result<test::HttpResponse> health = test::HttpGet(port, "/health", seconds(5));
  REQUIRE(health.ok());
  CHECK(health->code == 200);
  CHECK(health->body == "{\"health\":\"true\"}");
  for (const char* path : {"/readyz", "/livez"}) {
    Result<test::HttpResponse> r = test::HttpGet(port, path, seconds(5));
    REQUIRE(r.ok());
    CHECK(r->code == 200);
    CHECK(r->body == "ok\n");
  }
  Result<test::HttpResponse> missing = test::HttpGet(port, "/nope", seconds(5));
  REQUIRE(missing.ok());
  CHECK(missing->code == 404);

  // A TLS ClientHello on the plaintext port, and bytes that are no protocol at all: closed.
  Result<bool> tls =
      test::SendRaw(port, std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9), seconds(5));
  REQUIRE(tls.ok());
  CHECK(*tls);
  Result<bool> junk = test::SendRaw(port, "hello?\r\n", seconds(5));
  REQUIRE(junk.ok());
  CHECK(*junk);
  // An HTTP request that never ends its headers is not served from a truncated read: an
  // oversized one is closed.
  Result<bool> huge = test::SendRaw(port, "GET /" + std::string(64 * 1024, 'a'), seconds(5));
  REQUIRE(huge.ok());
  CHECK(*huge);

  const std::string page = Scrape(port);
  CHECK(SampleValue(page, "epoch_client_connections_rejected_total").value_or(0) >= 2);
  CHECK(SampleValue(page, "epoch_gateway_requests_total", {"path=\"other\"", "code=\"431\""})
            .value_or(0) >= 1);
  CHECK(SampleValue(page, "epoch_client_connections_total", {"protocol=\"http\""}).value_or(0) >=
        5);
  // gRPC still works on the same port, and the node is still up.
  EtcdctlOk(*cluster, {"put", "after-garbage", "v"}, {}, cluster->node(0).client_address());
  CHECK(SampleValue(Scrape(port), "epoch_client_connections_total", {"protocol=\"grpc\""})
            .value_or(0) >= 1);
  REQUIRE(cluster->CheckAlive().ok());
}

}  // namespace
}  // namespace epoch::integration
