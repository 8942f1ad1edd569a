// epochd's flags (server/daemon/src/node_flags.h): etcd's names mean what they mean in etcd, and
// every bad combination is refused with the flag to fix.
#include "node_flags.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace epoch::server {
namespace {

struct Parsed {
  bool parsed = false;      // CLI11 accepted the command line
  std::string parse_error;  // its message otherwise
  Status finished;          // FinishNodeFlags
  NodeConfig config;
};

std::vector<std::string> BaseArgs(const std::string& data_dir = "/tmp/epoch-flags-test-none") {
  return {"--name",
          "n1",
          "--data-dir",
          data_dir,
          "--initial-cluster",
          "n1=127.0.0.1:2380,n2=127.0.0.1:2381,n3=127.0.0.1:2382",
          "--initial-cluster-clients",
          "n1=127.0.0.1:2379,n2=127.0.0.1:2389,n3=127.0.0.1:2399"};
}

Parsed Parse(std::vector<std::string> args) {
  Parsed out;
  CLI::App app{"epochd"};
  NodeFlags flags;
  AddNodeFlags(app, flags, out.config);
  std::vector<const char*> argv{"epochd"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    out.parse_error = e.what();
    return out;
  }
  out.parsed = true;
  out.finished = FinishNodeFlags(flags, out.config);
  return out;
}

std::vector<std::string> With(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST_CASE("flags: the defaults make a valid member", "[server][config][flags]") {
  Parsed p = Parse(BaseArgs());
  REQUIRE(p.parsed);
  INFO(p.finished.ToString());
  CHECK(p.finished.ok());
  CHECK(p.config.limits.max_request_bytes == KvLimits{}.max_request_bytes);
  CHECK(p.config.limits.max_txn_ops == KvLimits{}.max_txn_ops);
}

TEST_CASE("flags: etcd's millisecond timing flags become ticks", "[server][config][flags]") {
  Parsed p = Parse(With(BaseArgs(), {"--heartbeat-interval", "30", "--election-timeout", "300"}));
  REQUIRE(p.parsed);
  REQUIRE(p.finished.ok());
  CHECK(p.config.tick == std::chrono::milliseconds(10));
  CHECK(p.config.raft.heartbeat_ticks == 3);
  CHECK(p.config.raft.election_timeout_min_ticks == 30);

  // etcd's defaults, as an etcd config file usually spells them out.
  Parsed etcd =
      Parse(With(BaseArgs(), {"--heartbeat-interval", "100", "--election-timeout", "1000"}));
  INFO(etcd.finished.ToString());
  REQUIRE(etcd.finished.ok());
  CHECK(etcd.config.raft.election_timeout_min_ticks == 100);
  CHECK(etcd.config.raft.max_election_timeout_ticks == 400);

  Parsed coarse = Parse(With(BaseArgs(), {"--tick-ms", "5", "--heartbeat-interval", "25"}));
  REQUIRE(coarse.finished.ok());
  CHECK(coarse.config.raft.heartbeat_ticks == 5);

  Parsed odd = Parse(With(BaseArgs(), {"--heartbeat-interval", "25"}));
  REQUIRE(odd.parsed);
  CHECK(odd.finished.message() == "--heartbeat-interval 25 is not a multiple of --tick-ms 10");

  // The Raft timing rules still hold: a heartbeat must fit three times in the election floor.
  Parsed slow =
      Parse(With(BaseArgs(), {"--heartbeat-interval", "100", "--election-timeout", "150"}));
  REQUIRE(slow.parsed);
  CHECK_FALSE(slow.finished.ok());
  CHECK(slow.finished.message().find("heartbeat_ticks") != std::string::npos);

  // Both spellings of one setting at once: refused by the parser.
  Parsed both = Parse(With(BaseArgs(), {"--heartbeat-interval", "30", "--heartbeat-ticks", "3"}));
  CHECK_FALSE(both.parsed);
  CHECK(both.parse_error.find("excludes") != std::string::npos);
}

TEST_CASE("flags: request limits, within the state machine's caps", "[server][config][flags]") {
  Parsed p = Parse(With(BaseArgs(), {"--max-request-bytes", "4194304", "--max-txn-ops", "512"}));
  REQUIRE(p.parsed);
  REQUIRE(p.finished.ok());
  CHECK(p.config.limits.max_request_bytes == 4194304);
  CHECK(p.config.limits.max_txn_ops == 512);

  Parsed big =
      Parse(With(BaseArgs(), {"--max-request-bytes", std::to_string(kMaxRequestBytesCap + 1)}));
  CHECK_FALSE(big.parsed);
  CHECK(big.parse_error.find("--max-request-bytes") != std::string::npos);
  CHECK_FALSE(Parse(With(BaseArgs(), {"--max-txn-ops", "0"})).parsed);
}

TEST_CASE("flags: --grpc-threads, 1 by default, 1 to 64", "[server][config][flags]") {
  Parsed p = Parse(BaseArgs());
  REQUIRE(p.parsed);
  CHECK(p.config.grpc_threads == 1);
  Parsed four = Parse(With(BaseArgs(), {"--grpc-threads", "4"}));
  REQUIRE(four.parsed);
  CHECK(four.config.grpc_threads == 4);
  for (const char* bad : {"0", "65", "-1"}) {
    Parsed refused = Parse(With(BaseArgs(), {"--grpc-threads", bad}));
    CHECK_FALSE(refused.parsed);
    CHECK(refused.parse_error.find("--grpc-threads") != std::string::npos);
  }
}

TEST_CASE("flags: --quota-backend-bytes as etcd's: 0 is 2 GiB, negative is none",
          "[server][config][flags]") {
  Parsed none_given = Parse(BaseArgs());
  REQUIRE(none_given.finished.ok());
  CHECK(none_given.config.SpaceQuotaBytes() == std::int64_t{2} << 30);
  Parsed zero = Parse(With(BaseArgs(), {"--quota-backend-bytes", "0"}));
  REQUIRE(zero.finished.ok());
  CHECK(zero.config.SpaceQuotaBytes() == std::int64_t{2} << 30);
  Parsed small = Parse(With(BaseArgs(), {"--quota-backend-bytes", "3000000"}));
  REQUIRE(small.finished.ok());
  CHECK(small.config.SpaceQuotaBytes() == 3'000'000);
  Parsed off = Parse(With(BaseArgs(), {"--quota-backend-bytes", "-1"}));
  REQUIRE(off.finished.ok());
  CHECK(off.config.SpaceQuotaBytes() == 0);
  Parsed junk = Parse(With(BaseArgs(), {"--quota-backend-bytes", "8GB"}));
  CHECK_FALSE(junk.parsed);
  CHECK(junk.parse_error.find("--quota-backend-bytes") != std::string::npos);
}

// etcd's flags as a deployment script passes them, with `listen` as --listen-client-urls.
std::vector<std::string> EtcdArgs(const std::string& listen) {
  return {"--name",
          "n1",
          "--data-dir",
          "/tmp/epoch-flags-test-none",
          "--initial-cluster",
          "n1=http://127.0.0.1:2380,n2=http://127.0.0.1:2381,n3=http://127.0.0.1:2382",
          "--listen-client-urls",
          listen,
          "--listen-peer-urls",
          "http://127.0.0.1:2380"};
}

TEST_CASE("flags: etcd's flags alone, without --initial-cluster-clients",
          "[server][config][flags]") {
  const std::string two = "http://127.0.0.1:2379,http://127.0.0.2:2379";
  Parsed p = Parse(With(EtcdArgs(two), {"--advertise-client-urls", "http://10.1.2.3:2379"}));
  REQUIRE(p.parsed);
  INFO(p.finished.ToString());
  REQUIRE(p.finished.ok());
  CHECK(p.config.listen_client.ToString() == "127.0.0.1:2379");
  REQUIRE(p.config.listen_client_extra.size() == 1);
  CHECK(p.config.listen_client_extra[0].ToString() == "127.0.0.2:2379");
  for (const MemberInfo& m : p.config.members) {
    // Its own client address is the advertised one; the others' are learned at run time.
    CHECK(m.client.port == (m.name == "n1" ? 2379 : 0));
    if (m.name == "n1") CHECK(m.client.host == "10.1.2.3");
  }

  Parsed listened = Parse(EtcdArgs(two));
  REQUIRE(listened.finished.ok());
  CHECK(listened.config.FindMember(listened.config.self_id())->client.ToString() ==
        "127.0.0.1:2379");

  Parsed wildcard = Parse(EtcdArgs("http://0.0.0.0:2379"));
  CHECK(wildcard.finished.message().find("--advertise-client-urls is required") !=
        std::string::npos);
  Parsed bad = Parse(EtcdArgs("http://127.0.0.1:2379,nope"));
  CHECK(bad.finished.message().find("--listen-client-urls") != std::string::npos);
}

TEST_CASE("flags: advertised addresses must be the member's own", "[server][config][flags]") {
  Parsed ok = Parse(With(BaseArgs(), {"--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                                      "--advertise-client-urls", "http://127.0.0.1:2379"}));
  REQUIRE(ok.parsed);
  INFO(ok.finished.ToString());
  CHECK(ok.finished.ok());

  Parsed peer = Parse(With(BaseArgs(), {"--initial-advertise-peer-urls", "127.0.0.1:2381"}));
  CHECK(peer.finished.message() ==
        "--initial-advertise-peer-urls 127.0.0.1:2381 does not match this member's "
        "--initial-cluster entry 127.0.0.1:2380");
  Parsed client = Parse(With(BaseArgs(), {"--advertise-client-urls", "127.0.0.1:9999"}));
  CHECK(client.finished.message().find("--advertise-client-urls 127.0.0.1:9999 does not match") !=
        std::string::npos);
  Parsed junk = Parse(With(BaseArgs(), {"--advertise-client-urls", "nonsense"}));
  CHECK(junk.finished.message().find("--advertise-client-urls") != std::string::npos);
}

TEST_CASE("flags: 'existing' joins on an empty data directory, restarts on one with state",
          "[server][config][flags]") {
  Parsed fresh = Parse(With(BaseArgs(), {"--initial-cluster-state", "existing"}));
  REQUIRE(fresh.parsed);
  CHECK(fresh.finished.ok());
  CHECK(fresh.config.join_existing);
  CHECK_FALSE(Parse(BaseArgs()).config.join_existing);

  const std::string dir = std::filesystem::temp_directory_path() / "epoch-flags-test-existing";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/wal");
  std::ofstream(dir + "/wal/0000000000000001.wal") << "x";
  Parsed restart = Parse(With(BaseArgs(dir), {"--initial-cluster-state", "existing"}));
  INFO(restart.finished.ToString());
  CHECK(restart.finished.ok());
  CHECK_FALSE(restart.config.join_existing);
  std::filesystem::remove_all(dir);

  CHECK_FALSE(Parse(With(BaseArgs(), {"--initial-cluster-state", "joining"})).parsed);
}

}  // namespace
}  // namespace epoch::server
