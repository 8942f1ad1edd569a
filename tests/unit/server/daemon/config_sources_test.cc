// Where epochd's settings come from (server/daemon/src/config_sources.h): etcd's YAML config file,
// EPOCH_* and ETCD_* variables, and the command line, with etcd 3.4's precedence.
#include "config_sources.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "epoch/test_support/temp_dir.h"
#include "node_flags.h"

namespace epoch::server {
namespace {

using test_support::TempDir;

struct Node {
  CLI::App app{"epochd"};
  NodeFlags flags;
  NodeConfig config;
  Node() { AddNodeFlags(app, flags, config); }

  // Resolves and parses as main() does; the status of FinishNodeFlags, or why it did not get there.
  Status Load(const std::vector<std::string>& args, const Environment& env,
              std::vector<std::string>* warnings = nullptr) {
    Result<ResolvedArgs> resolved = ResolveArgs(app, args, env);
    if (!resolved.ok()) return resolved.status();
    if (warnings != nullptr) *warnings = resolved->warnings;
    std::vector<std::string> reversed(resolved->args.rbegin(), resolved->args.rend());
    try {
      app.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return Status::InvalidArgument(e.what());
    }
    return FinishNodeFlags(flags, config);
  }
};

const char* const kCluster = "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2381";

std::string WriteFile(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.path() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

bool Contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const std::string& l : lines) {
    if (l.find(part) != std::string::npos) return true;
  }
  return false;
}

TEST_CASE("config: an etcd YAML file sets the node", "[server][config]") {
  TempDir dir("config-yaml");
  const std::string path = WriteFile(dir, "etcd.conf.yml",
                                     fmt::format(R"(
name: 'n2'
data-dir: {}/n2
wal-dir:
snapshot-count: 5000
heartbeat-interval: 20
election-timeout: 200
quota-backend-bytes: 1048576
listen-peer-urls: http://127.0.0.1:2381
listen-client-urls: http://127.0.0.1:2389,http://127.0.0.2:2389
max-snapshots: 5
max-wals: 5
cors:
initial-advertise-peer-urls: http://127.0.0.1:2381
advertise-client-urls: http://127.0.0.1:2389
discovery:
initial-cluster: {}
initial-cluster-token: 'prod-a'
initial-cluster-state: 'new'
enable-v2: false
proxy: 'off'
client-transport-security:
  client-cert-auth: false
  auto-tls: false
peer-transport-security:
  cert-file:
  auto-tls: false
debug: true
logger: zap
log-outputs: [stderr]
force-new-cluster: false
auto-compaction-retention: "0"
max-txn-ops: 64
)",
                                                 dir.path(), kCluster));
  Node node;
  std::vector<std::string> warnings;
  Status loaded = node.Load({"--config-file", path}, {}, &warnings);
  INFO(loaded.ToString());
  REQUIRE(loaded.ok());
  CHECK(node.config.name == "n2");
  CHECK(node.config.data_dir == dir.path() + "/n2");
  CHECK(node.config.cluster_token == "prod-a");
  CHECK(node.config.raft.heartbeat_ticks == 2);
  CHECK(node.config.raft.election_timeout_min_ticks == 20);
  CHECK(node.config.snapshot.compaction.trigger_entries == 5000);
  CHECK(node.config.quota_backend_bytes == 1048576);
  CHECK(node.config.limits.max_txn_ops == 64);
  CHECK(node.config.listen_client.ToString() == "127.0.0.1:2389");
  CHECK(node.config.listen_client_extra.size() == 1);
  CHECK(node.flags.log.level == "debug");
  CHECK(node.flags.config_file == path);
  CHECK_FALSE(node.config.force_new_cluster);
  CHECK(Contains(warnings, "'max-wals' ignored"));
}

TEST_CASE("config: etcd keys that would change behaviour are refused by name", "[server][config]") {
  // Each is a key of etcd 3.4's sample config file set to a value epochd cannot honour.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"enable-v2", "true"},
      {"auto-compaction-retention", "'1'"},
      {"discovery", "https://discovery.etcd.io/abc"},
      {"discovery-srv", "example.com"},
      {"proxy", "'on'"},
      {"wal-dir", "/var/lib/wal"},
      {"log-package-levels", "etcdserver=DEBUG"},
      {"cors", "'https://example.com'"},
      {"no-such-key", "1"},
      {"experimental-corrupt-check-time", "1m"},
  };
  for (const auto& [key, value] : refused) {
    Node node;
    std::vector<std::string> warnings;
    Result<std::vector<std::string>> args =
        FlagsFromEtcdYaml(node.app, key + ": " + value + "\n", "x.yml", &warnings);
    INFO(key);
    REQUIRE_FALSE(args.ok());
    CHECK(args.status().message().find("x.yml: key '" + key + "'") != std::string::npos);
  }
}

TEST_CASE("config: the transport-security maps hold etcd's TLS keys", "[server][config]") {
  CLI::App app{"with-tls"};
  std::string cert, key, peer_cert, cn;
  bool client_auth = false;
  app.add_option("--cert-file", cert);
  app.add_option("--key-file", key);
  app.add_flag("--client-cert-auth", client_auth);
  app.add_option("--peer-cert-file", peer_cert);
  app.add_option("--peer-cert-allowed-cn", cn);
  std::vector<std::string> warnings;
  Result<std::vector<std::string>> args = FlagsFromEtcdYaml(app, R"(
client-transport-security:
  cert-file: /etc/epoch/server.crt
  key-file: /etc/epoch/server.key
  client-cert-auth: true
peer-transport-security:
  cert-file: /etc/epoch/peer.crt
  allowed-cn: member
)",
                                                            "tls.yml", &warnings);
  REQUIRE(args.ok());
  CHECK(*args == std::vector<std::string>{
                     "--cert-file=/etc/epoch/server.crt", "--key-file=/etc/epoch/server.key",
                     "--client-cert-auth=true", "--peer-cert-file=/etc/epoch/peer.crt",
                     "--peer-cert-allowed-cn=member"});

  // A TLS setting without a flag here is refused when set, accepted when off.
  Result<std::vector<std::string>> missing = FlagsFromEtcdYaml(
      app, "peer-transport-security:\n  trusted-ca-file: /ca.crt\n  auto-tls: false\n", "tls.yml",
      &warnings);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("'peer-transport-security.trusted-ca-file'") !=
        std::string::npos);
}

TEST_CASE("config: malformed files are refused with the file's name", "[server][config]") {
  Node node;
  std::vector<std::string> warnings;
  for (const char* text : {"name: [unclosed\n", "- a list\n- not a map\n", "name: {a: 1}\n",
                           "client-transport-security: yes\n"}) {
    INFO(text);
    Result<std::vector<std::string>> args = FlagsFromEtcdYaml(node.app, text, "bad.yml", &warnings);
    REQUIRE_FALSE(args.ok());
    CHECK(args.status().message().rfind("bad.yml: ", 0) == 0);
  }
  CHECK_FALSE(node.Load({"--config-file", "/nonexistent/etcd.yml"}, {}).ok());
}

std::vector<std::string> BaseArgs() {
  return {"--name", "n1", "--data-dir", "/tmp/epoch-config-test-none", "--initial-cluster",
          kCluster};
}

TEST_CASE("config: the command line wins over EPOCH_ variables, which win over ETCD_ ones",
          "[server][config]") {
  Node node;
  std::vector<std::string> warnings;
  Status loaded = node.Load({"--name", "n1", "--max-txn-ops", "32"},
                            {{"ETCD_DATA_DIR", "/tmp/epoch-config-test-none"},
                             {"ETCD_INITIAL_CLUSTER", kCluster},
                             {"ETCD_MAX_TXN_OPS", "64"},
                             {"ETCD_SNAPSHOT_COUNT", "700"},
                             {"EPOCH_SNAPSHOT_COUNT", "900"},
                             {"ETCD_ELECTION_TIMEOUT", "300"},
                             {"EPOCH_ENABLE_FAILPOINTS", "true"},
                             {"ETCD_UNHEARD_OF", "1"},
                             {"ETCDCTL_API", "3"},
                             {"PATH", "/usr/bin"}},
                            &warnings);
  INFO(loaded.ToString());
  REQUIRE(loaded.ok());
  CHECK(node.config.data_dir == "/tmp/epoch-config-test-none");
  CHECK(node.config.limits.max_txn_ops == 32);
  CHECK(node.config.snapshot.compaction.trigger_entries == 900);
  CHECK(node.config.raft.election_timeout_min_ticks == 30);
  CHECK(node.config.enable_failpoints);
  CHECK(Contains(warnings, "ETCD_MAX_TXN_OPS ignored: --max-txn-ops is set already"));
  CHECK(Contains(warnings, "ETCD_SNAPSHOT_COUNT ignored"));
  CHECK(Contains(warnings, "unrecognized environment variable ETCD_UNHEARD_OF"));
  CHECK_FALSE(Contains(warnings, "ETCDCTL_API"));

  Node bad;
  CHECK_FALSE(bad.Load(BaseArgs(), {{"ETCD_MAX_TXN_OPS", "lots"}}).ok());
}

TEST_CASE("config: with a config file, other flags and variables are ignored, as in etcd",
          "[server][config]") {
  TempDir dir("config-only");
  const std::string path =
      WriteFile(dir, "etcd.yml",
                fmt::format("name: n2\ndata-dir: {}/n2\ninitial-cluster: {}\nmax-txn-ops: 200\n",
                            dir.path(), kCluster));
  Node node;
  std::vector<std::string> warnings;
  Status loaded =
      node.Load({"--max-txn-ops", "8", "--name", "n1"},
                {{"ETCD_CONFIG_FILE", path}, {"EPOCH_SNAPSHOT_COUNT", "900"}}, &warnings);
  INFO(loaded.ToString());
  REQUIRE(loaded.ok());
  CHECK(node.config.name == "n2");
  CHECK(node.config.limits.max_txn_ops == 200);
  CHECK(node.config.snapshot.compaction.trigger_entries != 900);
  CHECK(Contains(warnings, "--max-txn-ops ignored: --config-file is given"));
  CHECK(Contains(warnings, "EPOCH_SNAPSHOT_COUNT ignored"));
}

TEST_CASE("config: the process environment is read as name=value pairs", "[server][config]") {
  char a[] = "EPOCH_NAME=n1";
  char b[] = "EMPTY=";
  char c[] = "WEIRD";
  char* list[] = {a, b, c, nullptr};
  Environment env = EnvironmentFrom(list);
  CHECK(env == Environment{{"EPOCH_NAME", "n1"}, {"EMPTY", ""}});
}

TEST_CASE("config: force-new-cluster from a file, a variable or the command line",
          "[server][config]") {
  TempDir dir("config-force");
  const std::string path = WriteFile(
      dir, "etcd.conf.yml",
      fmt::format("name: n1\ndata-dir: {}/n1\ninitial-cluster: {}\nforce-new-cluster: true\n",
                  dir.path(), kCluster));
  Node from_file;
  REQUIRE(from_file.Load({"--config-file", path}, {}).ok());
  CHECK(from_file.config.force_new_cluster);
  Node from_env;
  REQUIRE(from_env.Load(BaseArgs(), {{"ETCD_FORCE_NEW_CLUSTER", "true"}}).ok());
  CHECK(from_env.config.force_new_cluster);
  std::vector<std::string> args = BaseArgs();
  args.push_back("--force-new-cluster");
  Node from_flag;
  REQUIRE(from_flag.Load(args, {}).ok());
  CHECK(from_flag.config.force_new_cluster);
  Node without;
  REQUIRE(without.Load(BaseArgs(), {}).ok());
  CHECK_FALSE(without.config.force_new_cluster);
}

}  // namespace
}  // namespace epoch::server
