// The cluster-wide timing end to end (docs/timing-and-safety.md §12): recorded when the cluster
// first has a leader; changed with `epochctl cluster timing set` and adopted by every member (the
// leader sees each voter report the new election timeout); refused to a member restarted with
// another given value, naming both; adopted by one restarted without the flags; and a member
// bootstrapped with an election timeout the others do not share stops, naming both.
#include <fmt/format.h>
#include <google/protobuf/util/json_util.h>

#include <map>
#include <mutex>
#include <string>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/process.h"
#include "epoch/v1/epoch.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

CommandResult Ctl(const TestCluster& cluster, std::vector<std::string> args) {
  args.insert(args.begin(), {EPOCHCTL_PATH, "--endpoints=" + cluster.Endpoints()});
  return test::RunCommand(args, {}, seconds(30));
}

std::string CtlOk(const TestCluster& cluster, const std::vector<std::string>& args) {
  CommandResult r = Ctl(cluster, args);
  INFO("epochctl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Whether the leader lists `voters` voters that all reported `ms`; `last` keeps what epochctl
// printed, for the failure message.
bool EveryVoterReports(const TestCluster& cluster, std::int64_t ms, std::size_t voters,
                       std::string* last) {
  CommandResult r = Ctl(cluster, {"-w", "json", "cluster", "timing", "get"});
  *last = r.Describe();
  if (r.exit_code != 0) return false;
  v1::TimingResponse timing;
  google::protobuf::util::JsonParseOptions options;
  if (!google::protobuf::util::JsonStringToMessage(r.out, &timing, options).ok()) return false;
  if (static_cast<std::size_t>(timing.voters_size()) != voters) return false;
  for (const v1::MemberTiming& v : timing.voters()) {
    if (v.election_timeout_ms() != ms) return false;
  }
  return true;
}

void RequireEveryVoterReports(const TestCluster& cluster, std::int64_t ms) {
  std::string last;
  const bool ok = Eventually([&] { return EveryVoterReports(cluster, ms, 3, &last); }, seconds(20));
  INFO("every voter should report " << ms << " ms; the last `cluster timing get`: " << last);
  REQUIRE(ok);
}

// A cluster whose members' election timeout flags the test sets per node before each start.
struct TimingCluster {
  std::mutex mu;
  // Guarded by mu; default: a heartbeat of 5 ticks and an election timeout of 15, both given.
  std::map<int, std::vector<std::string>> flags;
  ClusterPtr cluster;

  explicit TimingCluster(std::map<int, std::vector<std::string>> initial = {},
                         std::vector<int> may_exit = {})
      : flags(std::move(initial)) {
    test::ClusterOptions options;
    options.may_exit = std::move(may_exit);
    options.epochd_path = EPOCHD_PATH;
    options.nodes = 3;
    options.extra_flags = {"--tick-ms", "10"};
    options.node_flags = [this](int index, const std::vector<test::NodeInfo>&) {
      std::lock_guard lock(mu);
      auto it = flags.find(index);
      return it != flags.end() ? it->second
                               : std::vector<std::string>{"--heartbeat-ticks", "5",
                                                          "--election-timeout-ticks", "15"};
    };
    auto started = TestCluster::Start(options);
    INFO("starting the cluster: " << started.status().ToString());
    REQUIRE(started.ok());
    cluster.reset(started->release());
  }
  void SetFlags(int index, std::vector<std::string> f) {
    std::lock_guard lock(mu);
    flags[index] = std::move(f);
  }
};

TEST_CASE(
    "cluster timing: recorded, changed by epochctl and adopted everywhere; a restart with "
    "another given value is refused, one without it adopts",
    "[integration][timing]") {
  TimingCluster t;
  TestCluster& cluster = *t.cluster;
  REQUIRE(cluster.WaitHealthy(seconds(20)).ok());
  RequireEveryVoterReports(cluster, 150);
  const std::string got = CtlOk(cluster, {"cluster", "timing", "get"});
  CHECK_THAT(got, Catch::Contains("cluster: tick 10 ms, heartbeat 50 ms, election timeout 150 ms"));

  // A change every member adopts as it applies it: each voter's answers carry the new timeout.
  const std::string set = CtlOk(cluster, {"cluster", "timing", "set", "--election-timeout", "300",
                                          "--heartbeat-interval", "60"});
  CHECK_THAT(set, Catch::Contains("heartbeat 60 ms, election timeout 300 ms"));
  RequireEveryVoterReports(cluster, 300);
  for (int i = 0; i < 5; ++i) EtcdctlOk(cluster, {"put", fmt::format("after/set/{}", i), "v"});
  CHECK_THAT(EtcdctlOk(cluster, {"get", "after/set/4"}), Catch::Contains("after/set/4"));

  // Values a cluster cannot run are refused with the rule they break; nothing changes.
  CommandResult bad = Ctl(cluster, {"cluster", "timing", "set", "--election-timeout", "150"});
  CHECK(bad.exit_code != 0);
  CHECK_THAT(bad.err, Catch::Contains("at least three heartbeat intervals"));
  CommandResult nothing = Ctl(cluster, {"cluster", "timing", "set"});
  CHECK(nothing.exit_code != 0);
  CHECK_THAT(nothing.err, Catch::Contains("nothing to set"));

  // Restarted with the old value given explicitly: refused, naming both, exit 2.
  cluster.Kill(2);
  t.SetFlags(2, {"--election-timeout", "150"});
  REQUIRE(cluster.StartNode(2).ok());
  REQUIRE(Eventually([&] { return !cluster.IsRunning(2); }, seconds(20)));
  CHECK(cluster.ExitStatus(2) == 2);
  CHECK_THAT(cluster.LogTail(2),
             Catch::Contains("--election-timeout 150 ms (the cluster's is 300 ms)"));

  // Restarted without the flag: it adopts the cluster's timing.
  t.SetFlags(2, {});
  REQUIRE(cluster.StartNode(2).ok());
  REQUIRE(cluster.WaitHealthy(seconds(20)).ok());
  RequireEveryVoterReports(cluster, 300);
  CHECK_THAT(cluster.LogTail(2, 1 << 20), Catch::Contains("adopting the cluster's timing"));
  CHECK(cluster.CheckAlive().ok());
}

TEST_CASE(
    "cluster timing: a member bootstrapped with an election timeout the others do not "
    "share stops, naming both",
    "[integration][timing]") {
  TimingCluster t({{2, {"--election-timeout", "1000"}}}, /*may_exit=*/{2});
  TestCluster& cluster = *t.cluster;
  REQUIRE(Eventually([&] { return !cluster.IsRunning(2); }, seconds(30)));
  CHECK(cluster.ExitStatus(2) == 2);
  CHECK_THAT(cluster.LogTail(2),
             Catch::Contains("--election-timeout 1000 ms (the cluster's is 150 ms)"));
  // The two that agree record it and serve.
  for (int i = 0; i < 2; ++i) {
    EtcdctlOk(cluster, {"put", fmt::format("two/{}", i), "v"}, {},
              cluster.node(i).client_address());
  }
}

}  // namespace
}  // namespace epoch::integration
