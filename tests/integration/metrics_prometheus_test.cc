// A real Prometheus (Debian's) scraping a running 3-member cluster on its client ports, with
// deploy/prometheus/epoch-alerts.yaml loaded: queries through its HTTP API return series for the
// etcd names dashboards use, every query of deploy/prometheus/epoch-dashboard.json evaluates, and
// the no-leader and members-down alerts fire when two members are stopped. The rules' `for:`
// durations are set to 0s here (the promtool unit tests in prometheus_rules cover them), so the
// test takes seconds rather than minutes.
#include <fmt/format.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <csignal>
#include <regex>

#include "epoch/test_support/loopback.h"
#include "epoch/test_support/process.h"
#include "epoch/test_support/temp_dir.h"
#include "metrics_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

std::string UrlEncode(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

struct Prometheus {
  std::uint16_t port = 0;
  test::ChildProcess process;
  std::string log_path;

  // The body of /api/v1/query for `query`; empty if Prometheus did not answer.
  [[nodiscard]] std::string Query(std::string_view query) const {
    Result<test::HttpResponse> r =
        test::HttpGet(port, "/api/v1/query?query=" + UrlEncode(query), seconds(5));
    return r.ok() ? r->body : std::string();
  }
  // How many series the query returns (-1 if it failed).
  [[nodiscard]] int Series(std::string_view query) const {
    const std::string body = Query(query);
    if (body.find("\"status\":\"success\"") == std::string::npos) return -1;
    int n = 0;
    for (std::size_t at = body.find("\"metric\":"); at != std::string::npos;
         at = body.find("\"metric\":", at + 1)) {
      ++n;
    }
    return n;
  }
};

// The rules file with every `for:` set to 0s.
std::string RulesWithoutWait() {
  const std::string rules = ReadFile(EPOCH_PROMETHEUS_RULES);
  return std::regex_replace(rules, std::regex("for: [0-9]+[smh]"), "for: 0s");
}

// Every query of the Grafana dashboard, with its variables filled in.
std::vector<std::string> DashboardQueries() {
  google::protobuf::Struct dashboard;
  REQUIRE(google::protobuf::util::JsonStringToMessage(ReadFile(EPOCH_GRAFANA_DASHBOARD), &dashboard)
              .ok());
  std::vector<std::string> out;
  for (const auto& panel : dashboard.fields().at("panels").list_value().values()) {
    for (const auto& target : panel.struct_value().fields().at("targets").list_value().values()) {
      std::string expr = target.struct_value().fields().at("expr").string_value();
      expr = std::regex_replace(expr, std::regex("\\$job"), "epoch");
      expr = std::regex_replace(expr, std::regex("\\$__rate_interval"), "1m");
      out.push_back(expr);
    }
  }
  return out;
}

TEST_CASE("Prometheus scrapes a cluster, dashboard queries evaluate, the no-leader alert fires",
          "[integration][metrics][prometheus]") {
  auto cluster = StartCluster(3);
  Result<int> leader = cluster->WaitHealthy(seconds(20));
  REQUIRE(leader.ok());
  EtcdctlOk(*cluster, {"put", "k", "v"});

  test_support::TempDir dir("epoch-prometheus");
  Result<test::PortBlock> ports = test::PortBlock::Reserve();
  REQUIRE(ports.ok());
  std::string targets;
  for (int i = 0; i < cluster->size(); ++i) {
    targets += fmt::format("{}'127.0.0.1:{}'", i > 0 ? ", " : "", cluster->node(i).client_port);
  }
  WriteFile(dir.Sub("epoch-alerts.yaml"), RulesWithoutWait());
  WriteFile(dir.Sub("prometheus.yml"), fmt::format(R"(global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['{}']
scrape_configs:
  - job_name: epoch
    static_configs:
      - targets: [{}]
)",
                                                   dir.Sub("epoch-alerts.yaml"), targets));
  Prometheus prometheus;
  prometheus.port = ports->port(0);
  prometheus.log_path = dir.Sub("prometheus.log");
  Result<test::ChildProcess> process =
      test::ChildProcess::Spawn({kPrometheusPath, "--config.file=" + dir.Sub("prometheus.yml"),
                                 "--storage.tsdb.path=" + dir.Sub("data"),
                                 fmt::format("--web.listen-address=127.0.0.1:{}", prometheus.port)},
                                prometheus.log_path);
  REQUIRE(process.ok());
  prometheus.process = std::move(*process);
  INFO("prometheus log: " << ReadFileIfExists(prometheus.log_path).substr(0, 4000));

  // Every member scraped and up.
  CHECK(Eventually([&] { return prometheus.Series("up{job=\"epoch\"} == 1") == 3; }, seconds(30),
                   kProcessPoll));
  for (const char* name : {"etcd_server_has_leader", "etcd_server_proposals_committed_total",
                           "etcd_disk_wal_fsync_duration_seconds_bucket",
                           "etcd_mvcc_db_total_size_in_bytes", "grpc_server_handled_total",
                           "etcd_network_peer_sent_bytes_total", "process_resident_memory_bytes"}) {
    INFO(name);
    CHECK(prometheus.Series(name) >= 3);
  }
  CHECK(prometheus.Series("sum(etcd_server_is_leader) == 1") == 1);
  // A rate needs two scrapes of the counters.
  CHECK(Eventually([&] { return prometheus.Series("rate(process_cpu_seconds_total[1m])") == 3; },
                   seconds(20), kProcessPoll));
  for (const std::string& query : DashboardQueries()) {
    INFO(query);
    CHECK(prometheus.Series(query) >= 0);  // evaluates (an empty result is allowed: no failures)
  }

  // Two members stop: the survivor has no leader, and the alerts fire.
  const int survivor = (*leader + 1) % cluster->size();
  for (int i = 0; i < cluster->size(); ++i) {
    if (i != survivor) REQUIRE(cluster->Stop(i).ok());
  }
  CHECK(Eventually(
      [&] {
        return prometheus.Series("ALERTS{alertname=\"EpochNoLeader\",alertstate=\"firing\"}") == 1;
      },
      seconds(30), kProcessPoll));
  CHECK(Eventually(
      [&] {
        return prometheus.Series("ALERTS{alertname=\"EpochMembersDown\",alertstate=\"firing\"}") ==
               1;
      },
      seconds(30), kProcessPoll));

  prometheus.process.Signal(SIGTERM);
  if (!prometheus.process.WaitExit(seconds(10))) prometheus.process.KillAndReap();
}

}  // namespace
}  // namespace epoch::integration
