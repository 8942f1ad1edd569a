// --quota-backend-bytes end to end with etcdctl: writes fill the store past the quota, the
// cluster raises NOSPACE alarms and refuses writes that need space with etcd's message, reads
// and deletes go on, and the operator's etcd procedure — compact, defrag, alarm disarm — brings
// writes back.
#include <fmt/format.h>

#include <optional>
#include <random>
#include <thread>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

const std::string kNoSpace(epoch::etcd_errors::kNoSpace.message);
constexpr int kQuotaBytes = 3'000'000;

// Members listed by `etcdctl alarm list` as "memberID:<decimal> alarm:NOSPACE".
int NoSpaceAlarms(const TestCluster& cluster) {
  const std::string out = EtcdctlOk(cluster, {"alarm", "list"});
  int found = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    if (out.find(fmt::format("memberID:{} alarm:NOSPACE", cluster.node(i).member_id)) !=
        std::string::npos) {
      ++found;
    }
  }
  return found;
}

std::string RandomValue(std::size_t bytes, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::string v(bytes, '\0');
  for (char& c : v) c = static_cast<char>('a' + rng() % 26);
  return v;
}

// Puts 200 KiB values under `prefix` until the cluster refuses one with NOSPACE, waits until
// every member lists its NOSPACE alarm, and returns how many puts were accepted.
int FillUntilNoSpace(const TestCluster& cluster, const std::string& prefix, std::uint32_t seed) {
  const std::string value = RandomValue(200 << 10, seed);
  int accepted = 0;
  std::optional<CommandResult> refused;
  for (int i = 0; i < 40 && !refused; ++i) {
    CommandResult r = cluster.Etcdctl({"put", fmt::format("{}{}", prefix, i)}, value);
    if (r.exit_code == 0) {
      ++accepted;
    } else {
      refused = r;
    }
  }
  REQUIRE(refused.has_value());
  INFO(refused->Describe());
  CHECK(refused->err.find(kNoSpace) != std::string::npos);
  CHECK(accepted >= 5);  // the store starts near 1 MB

  // Every member's store is past the quota: each raises its own alarm (the one that refused the
  // put at once, the others on their periodic check).
  int alarms = 0;
  for (int attempt = 0; attempt < 50 && alarms < 3; ++attempt) {
    alarms = NoSpaceAlarms(cluster);
    if (alarms < 3) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(alarms == 3);
  return accepted;
}

CommandResult Epochctl(const TestCluster& cluster, std::vector<std::string> args) {
  args.insert(args.begin(), {EPOCHCTL_PATH, "--endpoints=" + cluster.Endpoints()});
  return test::RunCommand(args, {}, std::chrono::seconds(30));
}

TEST_CASE("etcdctl: past --quota-backend-bytes the cluster raises NOSPACE until disarmed",
          "[integration][etcdctl][quota]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--quota-backend-bytes", std::to_string(kQuotaBytes)});
  auto cluster = StartCluster(3, flags);
  const int accepted = FillUntilNoSpace(*cluster, "big/", 1);

  // Capped: anything that needs space is refused, however small; reads and deletes go on.
  EtcdctlFails(*cluster, {"put", "small", "v"}, kNoSpace);
  CommandResult grant = cluster->Etcdctl({"lease", "grant", "30"});
  INFO(grant.Describe());
  CHECK(grant.exit_code != 0);
  CHECK(grant.err.find(kNoSpace) != std::string::npos);
  EtcdctlFails(*cluster, {"txn", "-i"}, kNoSpace, "\nput small v\n\n\n");
  CHECK(EtcdctlOk(*cluster, {"get", "big/0", "--print-value-only"}).size() == (200 << 10) + 1);
  const std::string status = EtcdctlOk(*cluster, {"endpoint", "status"});
  CHECK(status.find("alarm:NOSPACE") != std::string::npos);
  CHECK(Lines(EtcdctlOk(*cluster, {"del", "--prefix", "big/"})).at(0) == std::to_string(accepted));

  // etcd's procedure: compact away the history, defragment every member, disarm.
  auto rev =
      ParseJson<etcdserverpb::RangeResponse>(EtcdctlOk(*cluster, {"get", "big/0", "-w", "json"}))
          .header()
          .revision();
  EtcdctlOk(*cluster, {"compact", std::to_string(rev)});
  const std::string defrag = EtcdctlOk(*cluster, {"defrag"});
  CHECK(Lines(defrag).size() == 3);
  const std::string disarmed = EtcdctlOk(*cluster, {"alarm", "disarm"});
  CHECK(Lines(disarmed).size() == 3);
  CHECK(NoSpaceAlarms(*cluster) == 0);
  // Every member logged each alarm raised and cleared as it applied them (docs/logging.md).
  for (int i = 0; i < cluster->size(); ++i) {
    const std::string log = ReadFileIfExists(cluster->node(i).log_path);
    for (int m = 0; m < cluster->size(); ++m) {
      const std::string fields =
          fmt::format(R"("alarm":"NOSPACE","alarm-member":"{}")", Hex(cluster->node(m).member_id));
      INFO("node " << i << " member " << m);
      CHECK(log.find(R"("level":"warn",)") != std::string::npos);
      CHECK(log.find(R"("msg":"alarm raised",)" + fields) != std::string::npos);
      CHECK(log.find(R"("msg":"alarm cleared",)" + fields) != std::string::npos);
    }
  }
  EtcdctlOk(*cluster, {"put", "small", "v"});
  EtcdctlOk(*cluster, {"lease", "grant", "30"});

  // No member raises it again: their stores are back under the quota (checked every second).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK(EtcdctlOk(*cluster, {"alarm", "list"}).empty());

  // The same procedure with epochctl.
  FillUntilNoSpace(*cluster, "again/", 2);
  CHECK(Lines(Epochctl(*cluster, {"alarm", "list"}).out).size() == 3);
  CHECK(Lines(Epochctl(*cluster, {"del", "--prefix", "again/"}).out).size() == 1);
  rev = ParseJson<etcdserverpb::RangeResponse>(EtcdctlOk(*cluster, {"get", "small", "-w", "json"}))
            .header()
            .revision();
  CHECK(Epochctl(*cluster, {"compaction", std::to_string(rev)}).exit_code == 0);
  CommandResult ctl_defrag = Epochctl(*cluster, {"defrag", "--cluster"});
  INFO(ctl_defrag.Describe());
  CHECK(ctl_defrag.exit_code == 0);
  CHECK(Lines(ctl_defrag.out).size() == 3);
  CommandResult ctl_disarm = Epochctl(*cluster, {"alarm", "disarm"});
  INFO(ctl_disarm.Describe());
  CHECK(ctl_disarm.exit_code == 0);
  CHECK(Lines(ctl_disarm.out).size() == 3);
  CHECK(ctl_disarm.out.find("alarm:NOSPACE") != std::string::npos);
  CHECK(Epochctl(*cluster, {"alarm", "list"}).out.empty());
  EtcdctlOk(*cluster, {"put", "small", "v2"});
}

TEST_CASE("etcdctl: no quota when --quota-backend-bytes is negative",
          "[integration][etcdctl][quota]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--quota-backend-bytes", "-1"});
  auto cluster = StartCluster(3, flags);
  const std::string value = RandomValue(200 << 10, 2);
  for (int i = 0; i < 20; ++i) EtcdctlOk(*cluster, {"put", fmt::format("big/{}", i)}, value);
  CHECK(EtcdctlOk(*cluster, {"alarm", "list"}).empty());
}

}  // namespace
}  // namespace epoch::integration
