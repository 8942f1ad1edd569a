// `etcdctl snapshot save` against a running cluster, then `epochd --restore-snapshot` of that
// file into every member of a NEW cluster, which then serves the same data (server/SNAPSHOT.md).
#include <fmt/format.h>

#include <filesystem>

#include "support.h"

namespace epoch::integration {
namespace {

// The arguments epochd --restore-snapshot needs for node i of `cluster` (the same identity flags
// the harness starts it with).
std::vector<std::string> RestoreArgs(const TestCluster& cluster, int i, const std::string& file,
                                     const std::string& data_dir) {
  std::string peers, clients;
  for (int j = 0; j < cluster.size(); ++j) {
    const test::NodeInfo& n = cluster.node(j);
    peers += fmt::format("{}{}=127.0.0.1:{}", peers.empty() ? "" : ",", n.name, n.peer_port);
    clients += fmt::format("{}{}=127.0.0.1:{}", clients.empty() ? "" : ",", n.name, n.client_port);
  }
  const test::NodeInfo& self = cluster.node(i);
  return {EPOCHD_PATH,
          "--restore-snapshot",
          file,
          "--name",
          self.name,
          "--data-dir",
          data_dir,
          "--listen-client-urls",
          self.client_address(),
          "--listen-peer-urls",
          fmt::format("127.0.0.1:{}", self.peer_port),
          "--initial-cluster",
          peers,
          "--initial-cluster-clients",
          clients,
          "--initial-cluster-token",
          cluster.cluster_token()};
}

test::CommandResult RunRestore(const TestCluster& cluster, int i, const std::string& file,
                               const std::string& data_dir) {
  return test::RunCommand(RestoreArgs(cluster, i, file, data_dir), {}, std::chrono::seconds(30));
}

}  // namespace

TEST_CASE("etcdctl snapshot save, then restore a new cluster from the file and read it back",
          "[integration][snapshot]") {
  auto source = StartCluster();
  auto kv = etcdserverpb::KV::NewStub(source->Channel(0));
  // ~1 KiB of incompressible-ish text per key, so the archive spans many stream messages.
  std::uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < 200; ++i) {
    std::string value = fmt::format("value-{}-", i);
    while (value.size() < 1024) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      value += fmt::format("{:016x}", x);
    }
    REQUIRE(Put(*kv, fmt::format("snap/{:04}", i), value).ok());
  }
  EtcdctlOk(*source, {"del", "snap/0007"});
  EtcdctlOk(*source, {"put", "snap/0008", "overwritten"});
  etcdserverpb::RangeResponse before = MustRange(*source, 0, "snap/", PrefixEnd("snap/"));
  REQUIRE(before.kvs_size() == 199);

  const std::string file = source->dir() + "/backup.db";
  std::string out =
      EtcdctlOk(*source, {"snapshot", "save", file}, {}, source->node(1).client_address());
  CHECK_THAT(out, Catch::Contains("Snapshot saved at " + file));
  const std::string bytes = ReadFile(file);
  CHECK(bytes.size() % 512 == 32);      // what etcdctl checked before accepting it
  CHECK(bytes.size() > 3 * 64 * 1024);  // several SnapshotResponse messages
  fmt::print("snapshot save: {} bytes for {} keys at revision {}\n", bytes.size(),
             before.kvs_size(), before.header().revision());

  // A fresh cluster (its own ports and directories): stop it, restore every member from the
  // file, start it again.
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.cluster_token = "epoch-restored";
  auto restored_cluster = TestCluster::Start(options);
  REQUIRE(restored_cluster.ok());
  TestCluster& target = **restored_cluster;
  for (int i = 0; i < target.size(); ++i) REQUIRE(target.Stop(i).ok());

  SECTION("a non-empty data dir and a damaged file are refused with clear messages") {
    test::CommandResult busy = RunRestore(target, 0, file, target.node(0).data_dir);
    INFO(busy.Describe());
    CHECK(busy.exit_code == 1);
    CHECK_THAT(busy.err, Catch::Contains("is not empty"));

    std::string damaged = bytes;
    damaged[damaged.size() / 2] = static_cast<char>(damaged[damaged.size() / 2] ^ 1);
    const std::string bad_file = source->dir() + "/damaged.db";
    WriteFile(bad_file, damaged);
    const std::string fresh = target.dir() + "/fresh";
    test::CommandResult bad = RunRestore(target, 0, bad_file, fresh);
    INFO(bad.Describe());
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.err, Catch::Contains("SHA-256 checksum mismatch"));
    CHECK(!std::filesystem::exists(fresh));

    WriteFile(bad_file, bytes.substr(0, 1000));
    test::CommandResult cut = RunRestore(target, 0, bad_file, fresh);
    CHECK(cut.exit_code == 1);
    CHECK_THAT(cut.err, Catch::Contains("truncated or not a snapshot"));
  }

  SECTION("every member restores the file; the new cluster serves the same keys and revision") {
    for (int i = 0; i < target.size(); ++i) {
      std::filesystem::remove_all(target.node(i).data_dir);
      test::CommandResult r = RunRestore(target, i, file, target.node(i).data_dir);
      INFO(r.Describe());
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::Contains("of a new 3-member cluster"));
    }
    for (int i = 0; i < target.size(); ++i) REQUIRE(target.StartNode(i).ok());
    Result<int> leader = target.WaitHealthy(std::chrono::seconds(30));
    INFO(leader.status().ToString());
    REQUIRE(leader.ok());

    for (int i = 0; i < target.size(); ++i) {
      etcdserverpb::RangeResponse after = MustRange(target, i, "snap/", PrefixEnd("snap/"));
      INFO("node " << target.node(i).name);
      REQUIRE(after.kvs_size() == before.kvs_size());
      for (int k = 0; k < after.kvs_size(); ++k) {
        CHECK(after.kvs(k).key() == before.kvs(k).key());
        CHECK(after.kvs(k).value() == before.kvs(k).value());
        CHECK(after.kvs(k).mod_revision() == before.kvs(k).mod_revision());
        CHECK(after.kvs(k).create_revision() == before.kvs(k).create_revision());
      }
      CHECK(after.header().revision() == before.header().revision());
    }
    std::string got = EtcdctlOk(target, {"get", "snap/0008", "--print-value-only"});
    CHECK(got == "overwritten\n");
    CHECK(EtcdctlOk(target, {"get", "snap/0007"}).empty());
    // The new cluster continues the revision sequence of the old one.
    auto new_kv = etcdserverpb::KV::NewStub(target.Channel(*leader));
    etcdserverpb::PutResponse put;
    REQUIRE(Put(*new_kv, "after-restore", "yes", &put).ok());
    CHECK(put.header().revision() == before.header().revision() + 1);
    CHECK(target.CheckAlive().ok());
  }
}

}  // namespace epoch::integration
