// etcdctl 3.4 `lock` and `elect` against a real 3-node cluster (docs/etcd-compatibility.md §2: both
// are the clientv3 concurrency recipes over KV, Lease and Watch): the locked command gets
// ETCD_LOCK_KEY and ETCD_LOCK_REV; concurrent holders never overlap and their revisions grow in
// holding order; `etcdctl lock` and the server-side Lock service exclude each other; `elect`
// campaigns, a second candidate takes over when the first resigns (SIGINT), `elect -l` observes
// both and a Proclaim.
#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "recipe_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

// A shell command for `etcdctl lock NAME -- /bin/sh -c SCRIPT`.
std::vector<std::string> LockArgs(const std::string& name, const std::string& script) {
  return {"lock", name, "--", "/bin/sh", "-c", script};
}

TEST_CASE("etcdctl lock runs the command with ETCD_LOCK_KEY and ETCD_LOCK_REV, then unlocks",
          "[integration][etcdctl][lock]") {
  auto cluster = StartCluster();
  etcdserverpb::PutResponse before;
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  REQUIRE(Put(*kv, "before-lock", "x", &before).ok());

  const std::string out =
      EtcdctlOk(*cluster, LockArgs("jobs/lk1", "echo \"key=$ETCD_LOCK_KEY rev=$ETCD_LOCK_REV\""));
  std::smatch m;
  INFO("the locked command printed: " << out);
  REQUIRE(std::regex_search(out, m, std::regex("key=(jobs/lk1/[0-9a-f]+) rev=([0-9]+)")));
  CHECK(std::stoll(m[2].str()) > before.header().revision());
  // Unlocked once the command exited.
  auto left = RangePrefix(cluster->Channel(0), "jobs/lk1/");
  REQUIRE(left);
  CHECK(left->kvs_size() == 0);
}

TEST_CASE("etcdctl lock: concurrent holders never overlap and revisions grow in holding order",
          "[integration][etcdctl][lock]") {
  auto cluster = StartCluster();
  const std::string file = cluster->dir() + "/critical-section.txt";
  // Start marker, a short critical section, end marker: an overlap interleaves the lines.
  const std::string script = fmt::format(
      "echo \"start $ETCD_LOCK_REV\" >> {0}; sleep 0.2; echo \"end $ETCD_LOCK_REV\" >> {0}", file);
  constexpr int kHolders = 3;
  std::vector<CommandResult> results(kHolders);
  std::vector<std::thread> threads;
  for (int i = 0; i < kHolders; ++i) {
    threads.emplace_back([&, i] {
      results[static_cast<std::size_t>(i)] =
          cluster->Etcdctl(LockArgs("jobs/lk2", script), {}, cluster->Endpoints({i}));
    });
  }
  for (auto& t : threads) t.join();
  for (const CommandResult& r : results) {
    INFO(r.Describe());
    CHECK(r.exit_code == 0);
  }
  const std::vector<std::string> lines = Lines(ReadFileIfExists(file));
  INFO("critical-section file:\n" << ReadFileIfExists(file));
  REQUIRE(lines.size() == 2 * kHolders);
  std::int64_t previous = 0;
  for (std::size_t i = 0; i < lines.size(); i += 2) {
    REQUIRE(lines[i].starts_with("start "));
    REQUIRE(lines[i + 1].starts_with("end "));
    const std::int64_t rev = std::stoll(lines[i].substr(6));
    CHECK(std::stoll(lines[i + 1].substr(4)) == rev);
    CHECK(rev > previous);
    previous = rev;
  }
}

TEST_CASE("etcdctl lock waits for a holder of the server-side Lock service",
          "[integration][etcdctl][lock]") {
  auto cluster = StartCluster();
  const std::int64_t lease = GrantLease(cluster->Channel(0), 30);
  REQUIRE(lease != 0);
  LockOutcome held = Lock(cluster->Channel(0), "jobs/lk3", lease);
  REQUIRE(held.status.ok());

  CommandResult r;
  std::thread t([&] { r = cluster->Etcdctl(LockArgs("jobs/lk3", "echo \"$ETCD_LOCK_REV\"")); });
  // etcdctl queued behind the service's holder, and is still waiting.
  const bool queued = Eventually(
      [&] {
        auto q = RangePrefix(cluster->Channel(0), "jobs/lk3/");
        return q && q->kvs_size() == 2;
      },
      std::chrono::seconds(10), kProcessPoll);
  grpc::Status unlocked = Unlock(cluster->Channel(0), held.key);
  t.join();
  REQUIRE(queued);
  REQUIRE(unlocked.ok());
  INFO(r.Describe());
  REQUIRE(r.exit_code == 0);
  CHECK(std::stoll(r.out) > held.token);
}

// A background `etcdctl elect` whose output goes to a log file.
struct Elect {
  test::ChildProcess process;
  std::string log;

  Elect(const TestCluster& cluster, const std::string& log_name, std::vector<std::string> args)
      : log(cluster.dir() + "/" + log_name) {
    std::vector<std::string> argv = {test::kEtcdctlPath, "--endpoints=" + cluster.Endpoints(),
                                     "elect"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto p = test::ChildProcess::Spawn(argv, log);
    REQUIRE(p.ok());
    process = std::move(*p);
  }
  bool Printed(const std::string& text) const {
    return Eventually([&] { return ReadFileIfExists(log).find(text) != std::string::npos; },
                      std::chrono::seconds(10), kProcessPoll);
  }
};

TEST_CASE("etcdctl elect: campaign, observe with -l, takeover on resign, proclaim",
          "[integration][etcdctl][election]") {
  auto cluster = StartCluster();
  Elect a(*cluster, "elect-a.log", {"ec", "alpha"});
  REQUIRE(a.Printed("alpha"));
  Elect observer(*cluster, "elect-l.log", {"-l", "ec"});
  REQUIRE(observer.Printed("alpha"));
  Elect b(*cluster, "elect-b.log", {"ec", "beta"});
  REQUIRE(Eventually(
      [&] {
        auto q = RangePrefix(cluster->Channel(0), "ec/");
        return q && q->kvs_size() == 2;
      },
      std::chrono::seconds(10), kProcessPoll));
  CHECK(ReadFileIfExists(b.log).find("beta") == std::string::npos);  // queued, not elected

  a.process.Signal(SIGINT);  // etcdctl resigns and exits
  CHECK(a.process.WaitExit(std::chrono::seconds(10)) == 0);
  REQUIRE(b.Printed("beta"));
  REQUIRE(observer.Printed("beta"));

  // Proclaim a new value as b's leadership through the Election service; the observer sees it.
  auto q = RangePrefix(cluster->Channel(0), "ec/");
  REQUIRE(q);
  REQUIRE(q->kvs_size() == 1);
  v3electionpb::ProclaimRequest proclaim;
  proclaim.mutable_leader()->set_name("ec");
  proclaim.mutable_leader()->set_key(q->kvs(0).key());
  proclaim.mutable_leader()->set_rev(q->kvs(0).create_revision());
  proclaim.mutable_leader()->set_lease(q->kvs(0).lease());
  proclaim.set_value("beta-2");
  auto stub = v3electionpb::Election::NewStub(cluster->Channel(1));
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  v3electionpb::ProclaimResponse response;
  grpc::Status proclaimed = stub->Proclaim(&ctx, proclaim, &response);
  INFO(proclaimed.error_message());
  REQUIRE(proclaimed.ok());
  CHECK(observer.Printed("beta-2"));
  b.process.Signal(SIGINT);
  observer.process.Signal(SIGINT);
  CHECK(b.process.WaitExit(std::chrono::seconds(10)) == 0);
}

}  // namespace
}  // namespace epoch::integration
