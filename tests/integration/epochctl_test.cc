// epochctl (client/ctl) against a real 3-node cluster, command by command, including the error
// paths: a compacted and a future revision, an unknown lease, an unreachable endpoint, a
// membership change etcd refuses (bad URLs, unknown member), a lock whose session is lost, and no
// leader (two of three members stopped). Cases share one cluster each to stay short.
#include <fmt/format.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

CommandResult Ctl(const TestCluster& cluster, std::vector<std::string> args,
                  std::string_view stdin_data = {}, std::optional<std::string> endpoints = {},
                  milliseconds timeout = seconds(30)) {
  args.insert(args.begin(),
              {EPOCHCTL_PATH, "--endpoints=" + endpoints.value_or(cluster.Endpoints())});
  return test::RunCommand(args, stdin_data, timeout);
}

std::string CtlOk(const TestCluster& cluster, const std::vector<std::string>& args,
                  std::string_view stdin_data = {}, std::optional<std::string> endpoints = {}) {
  CommandResult r = Ctl(cluster, args, stdin_data, std::move(endpoints));
  INFO("epochctl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// Non-zero exit, one "Error: ..." line on stderr containing `error`.
void CtlFails(const TestCluster& cluster, const std::vector<std::string>& args,
              std::string_view error, std::string_view stdin_data = {},
              std::optional<std::string> endpoints = {}) {
  CommandResult r = Ctl(cluster, args, stdin_data, std::move(endpoints));
  INFO("epochctl " << fmt::format("{}", fmt::join(args, " ")) << ": " << r.Describe());
  CHECK(r.exit_code != 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.err.find("Error: ") != std::string::npos);
  CHECK(r.err.find(error) != std::string::npos);
}

std::string LeaseIdFrom(const std::string& grant_output) {
  // "lease 694d7a1b2c3d4e5f granted with TTL(30s)"
  REQUIRE(grant_output.rfind("lease ", 0) == 0);
  return grant_output.substr(6, 16);
}

std::string TempPath(const TestCluster& cluster, const std::string& name) {
  return (std::filesystem::path(cluster.dir()) / name).string();
}

// A long-running epochctl (output to a log file) that the test signals.
test::ChildProcess SpawnCtl(const TestCluster& cluster, std::vector<std::string> args,
                            const std::string& log) {
  args.insert(args.begin(), {EPOCHCTL_PATH, "--endpoints=" + cluster.Endpoints()});
  Result<test::ChildProcess> child = test::ChildProcess::Spawn(args, log);
  REQUIRE(child.ok());
  return std::move(*child);
}

// Polls the log until it contains `text` (20 s deadline).
bool LogShows(const std::string& log, const std::string& text) {
  return Eventually([&] { return ReadFileIfExists(log).find(text) != std::string::npos; },
                    seconds(20), kProcessPoll);
}

}  // namespace

TEST_CASE("epochctl: put get del txn watch compaction, cluster views, errors, no leader",
          "[integration][epochctl]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;

  // put / get with etcdctl's output and flags.
  CHECK(CtlOk(c, {"put", "a/1", "one"}) == "OK\n");
  CHECK(CtlOk(c, {"put", "a/2", "two"}) == "OK\n");
  CHECK(CtlOk(c, {"put", "a/3"}, "three") == "OK\n");  // value from stdin
  CHECK(CtlOk(c, {"put", "a/1", "uno", "--prev-kv"}) == "OK\na/1\none\n");
  CHECK(CtlOk(c, {"get", "a/1"}) == "a/1\nuno\n");
  CHECK(CtlOk(c, {"get", "a/", "--prefix"}) == "a/1\nuno\na/2\ntwo\na/3\nthree\n");
  CHECK(CtlOk(c, {"get", "a/", "--prefix", "--limit=1", "--keys-only"}) == "a/1\n\n");
  CHECK(CtlOk(c, {"get", "a/", "--prefix", "--print-value-only", "--sort-by=CREATE",
                  "--order=DESCEND"}) == "three\ntwo\nuno\n");
  CHECK(CtlOk(c, {"get", "a/", "--prefix", "--count-only"}) == "3\n");
  CHECK(CtlOk(c, {"get", "a/2", "--from-key", "--keys-only"}) == "a/2\n\na/3\n\n");
  CHECK(CtlOk(c, {"get", "a/1", "a/3", "--keys-only", "--consistency=s"}) == "a/1\n\na/2\n\n");
  auto json = ParseJson<etcdserverpb::RangeResponse>(CtlOk(c, {"get", "a/1", "-w", "json"}));
  REQUIRE(json.kvs_size() == 1);
  CHECK(json.kvs(0).value() == "uno");
  CHECK(json.kvs(0).version() == 2);
  const std::int64_t first_rev = json.kvs(0).create_revision();
  CHECK(CtlOk(c, {"get", "a/1", "--rev", std::to_string(first_rev)}) == "a/1\none\n");
  CHECK(CtlOk(c, {"get", "a/1", "-w", "table"}).find("| a/1 |   uno |") != std::string::npos);

  // txn from stdin (etcdctl syntax), both branches, and a malformed one.
  CHECK(
      CtlOk(c, {"txn"}, "value(\"a/1\") = \"uno\"\n\nput t/ok yes\nget a/2\n\nput t/no yes\n\n") ==
      "SUCCESS\n\nOK\n\na/2\ntwo\n");
  CHECK(CtlOk(c, {"txn"}, "mod(\"a/1\") < \"1\"\n\nput t/ok2 yes\n\ndel a/2 --prev-kv\n\n") ==
        "FAILURE\n\n1\na/2\ntwo\n");
  CHECK(CtlOk(c, {"txn", "-i"}, "create(\"t/ok\") > \"0\"\n\nget t/ok\n\n\n")
            .find("SUCCESS\n\nt/ok\nyes\n") != std::string::npos);
  CtlFails(c, {"txn"}, "malformed comparison", "value(a/1) = \"x\"\n\n\n\n");
  CtlFails(c, {"txn"}, "invalid txn request", "\nfrobnicate k\n\n\n");

  // watch replays history from --rev and stops after --max-events.
  const std::string w1 = CtlOk(c, {"put", "w/x", "1", "-w", "json"});
  const auto put_rev = ParseJson<etcdserverpb::PutResponse>(w1).header().revision();
  CHECK(CtlOk(c, {"put", "w/x", "2"}) == "OK\n");
  CHECK(CtlOk(c, {"del", "w/x"}) == "1\n");
  CHECK(CtlOk(c, {"watch", "w/", "--prefix", "--rev", std::to_string(put_rev), "--prev-kv",
                  "--max-events", "3"}) ==
        "PUT\nw/x\n1\nPUT\nw/x\n1\nw/x\n2\nDELETE\nw/x\n2\nw/x\n\n");

  // del with --prefix and --prev-kv.
  CHECK(CtlOk(c, {"del", "t/", "--prefix"}) == "1\n");

  // Compaction, then the bad ranges: compacted and future revisions.
  const std::int64_t now_rev =
      ParseJson<etcdserverpb::RangeResponse>(CtlOk(c, {"get", "a/1", "-w", "json"}))
          .header()
          .revision();
  CHECK(CtlOk(c, {"compaction", std::to_string(now_rev - 1), "--physical"}) ==
        fmt::format("compacted revision {}\n", now_rev - 1));
  CtlFails(c, {"get", "a/1", "--rev", std::to_string(first_rev)},
           std::string(epoch::etcd_errors::kCompacted.message));
  CtlFails(c, {"get", "a/1", "--rev", std::to_string(now_rev + 1000)},
           std::string(epoch::etcd_errors::kFutureRev.message));
  CtlFails(c, {"watch", "a/1", "--rev", std::to_string(first_rev), "--max-events", "1"},
           "required revision has been compacted");

  // Cluster views.
  const std::string members = CtlOk(c, {"member", "list"});
  CHECK(Lines(members).size() == 3);
  CHECK(members.find(Hex(c.node(0).member_id) + ", started, n1, ") != std::string::npos);
  CHECK(CtlOk(c, {"member", "list", "-w", "table"}).find("| IS LEARNER |") != std::string::npos);
  const std::string status = CtlOk(c, {"endpoint", "status"});
  CHECK(Lines(status).size() == 3);
  CHECK(status.find(", true, false, ") != std::string::npos);  // exactly one leader line below
  CHECK(Lines(CtlOk(c, {"endpoint", "health", "--cluster"})).size() == 3);
  CHECK(CtlOk(c, {"endpoint", "health"}).find("is healthy: successfully committed proposal") !=
        std::string::npos);
  CHECK(CtlOk(c, {"alarm", "list"}).empty());
  CtlFails(c, {"member", "add", "n4", "--peer-urls=127.0.0.1:1"},
           etcd_errors::kMemberBadUrls.message);
  CtlFails(c, {"member", "remove", "1234"}, etcd_errors::kMemberNotFound.message);
  CtlFails(c, {"member", "promote", "1234"}, etcd_errors::kMemberNotFound.message);
  // member add prints etcdctl's lines for starting the new member; remove names it back.
  const std::string added =
      CtlOk(c, {"member", "add", "n4", "--learner", "--peer-urls=http://127.0.0.1:1"});
  std::string new_id = added.substr(7, 16);  // "Member %16x added to cluster %16x"
  new_id.erase(0, new_id.find_first_not_of(' '));
  CHECK(added.find(" added to cluster ") == 23);
  CHECK(added.find("\nETCD_NAME=\"n4\"\nETCD_INITIAL_CLUSTER=\"") != std::string::npos);
  CHECK(added.find("n4=http://127.0.0.1:1") != std::string::npos);
  CHECK(added.find("ETCD_INITIAL_ADVERTISE_PEER_URLS=\"http://127.0.0.1:1\"\n"
                   "ETCD_INITIAL_CLUSTER_STATE=\"existing\"\n") != std::string::npos);
  // member update replaces the peer URLs, as etcdctl's; member list shows the new ones.
  CtlFails(c, {"member", "update", "1234", "--peer-urls=http://127.0.0.1:2"},
           etcd_errors::kMemberNotFound.message);
  CHECK(CtlOk(c, {"member", "update", new_id, "--peer-urls=http://127.0.0.1:2"})
            .find(" updated in cluster ") == 23);
  CHECK(CtlOk(c, {"member", "list"}).find("http://127.0.0.1:2,") != std::string::npos);
  CHECK(CtlOk(c, {"member", "remove", new_id}).find(" removed from cluster ") == 23);

  // move-leader to a follower, then every member names it.
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  const int target = (*leader + 1) % 3;
  CHECK(CtlOk(c, {"move-leader", Hex(c.node(target).member_id)}) ==
        fmt::format("Leadership transferred from {} to {}\n", Hex(c.node(*leader).member_id),
                    Hex(c.node(target).member_id)));
  Result<int> moved = cluster->WaitForLeader(seconds(10));
  REQUIRE(moved.ok());
  CHECK(*moved == target);
  CtlFails(c, {"move-leader", "abc"},
           std::string(epoch::etcd_errors::kBadLeaderTransferee.message));

  // Flags and completion.
  CtlFails(c, {"get", "a/1", "-w", "xml"}, "unsupported output format");
  // etcdctl's ExitBadFeature, for an unknown format and for one a command has no printer for.
  CHECK(Ctl(c, {"get", "a/1", "-w", "xml"}).exit_code == 4);
  CHECK(Ctl(c, {"endpoint", "status", "-w", "protobuf"}).exit_code == 4);
  CtlFails(c, {"lease", "revoke", "xyz"}, "bad lease ID");
  CHECK(CtlOk(c, {"completion", "bash"}).find("complete -F _epochctl epochctl") !=
        std::string::npos);

  // An unreachable endpoint: non-zero within the timeouts, with the reason.
  const auto start = Clock::now();
  CommandResult unreachable =
      Ctl(c, {"--dial-timeout=300ms", "--command-timeout=1s", "get", "a/1"}, {}, "127.0.0.1:1");
  INFO(unreachable.Describe());
  CHECK(unreachable.exit_code == 1);
  CHECK(unreachable.err.find("Error: ") == 0);
  CHECK(unreachable.err.find("127.0.0.1:1") != std::string::npos);
  CHECK(Clock::now() - start < seconds(10));

  // EPOCH_ENDPOINTS instead of --endpoints.
  CommandResult from_env = test::RunCommand({EPOCHCTL_PATH, "get", "a/1"}, {}, seconds(20),
                                            {"EPOCH_ENDPOINTS=" + c.Endpoints()});
  CHECK(from_env.out == "a/1\nuno\n");

  // No leader: stop two of three; writes and linearizable reads fail within the command
  // timeout, health says unhealthy, serializable reads still work on the survivor.
  const int survivor = *moved;
  for (int i = 0; i < 3; ++i) {
    if (i != survivor) cluster->Kill(i);
  }
  const std::string one = c.Endpoints({survivor});
  CtlFails(c, {"--command-timeout=2s", "put", "x", "y"}, "", {}, one);
  CtlFails(c, {"--command-timeout=2s", "get", "a/1"}, "", {}, one);
  CtlFails(c, {"--command-timeout=2s", "endpoint", "health"}, "unhealthy cluster", {}, one);
  CHECK(CtlOk(c, {"get", "a/1", "--consistency=s"}, {}, one) == "a/1\nuno\n");
}

TEST_CASE("epochctl: leases and lease show, lock with a command, elect, jobs, snapshots",
          "[integration][epochctl]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;

  // Leases over the etcd API.
  const std::string id = LeaseIdFrom(CtlOk(c, {"lease", "grant", "30"}));
  CHECK(CtlOk(c, {"put", "held/k", "v", "--lease=" + id}) == "OK\n");
  CHECK(CtlOk(c, {"lease", "timetolive", id, "--keys"}).find("attached keys([held/k])") !=
        std::string::npos);
  CHECK(CtlOk(c, {"lease", "list"}).find(id) != std::string::npos);
  CHECK(CtlOk(c, {"lease", "keep-alive", "--once", id}) ==
        fmt::format("lease {} keepalived with TTL(30)\n", id));
  // Epoch's view: the cluster-clock deadline, the extension bound, keys and fencing tokens.
  const std::int64_t token =
      ParseJson<etcdserverpb::RangeResponse>(CtlOk(c, {"get", "held/k", "-w", "json"}))
          .kvs(0)
          .create_revision();
  const std::string show = CtlOk(c, {"lease", "show", id});
  CHECK(show.find("granted TTL:        30000 ms") != std::string::npos);
  CHECK(show.find("max extension:") != std::string::npos);
  CHECK(show.find(fmt::format("held/k token={}", token)) != std::string::npos);
  CHECK(show.find(fmt::format("fencing token:      {}", token)) != std::string::npos);
  CHECK(CtlOk(c, {"lease", "revoke", id}) == fmt::format("lease {} revoked\n", id));
  CHECK(CtlOk(c, {"get", "held/k"}).empty());
  // The unknown lease, everywhere.
  CtlFails(c, {"lease", "revoke", id}, "Error: etcdserver: requested lease not found");
  CtlFails(c, {"lease", "keep-alive", "--once", id},
           std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CtlFails(c, {"lease", "keep-alive", id}, "expired or revoked");
  CtlFails(c, {"lease", "show", id}, std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CtlFails(c, {"put", "k", "v", "--lease=" + id},
           std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CHECK(CtlOk(c, {"lease", "timetolive", id}) == fmt::format("lease {} already expired\n", id));

  // lock NAME -- command: token and key in the environment, the command's exit status.
  const std::string script = "echo \"$EPOCH_FENCING_TOKEN $ETCD_LOCK_KEY $ETCD_LOCK_REV\"; exit 3";
  CommandResult locked = Ctl(c, {"lock", "L", "--", "sh", "-c", script});
  INFO(locked.Describe());
  CHECK(locked.exit_code == 3);
  CHECK(locked.err.empty());
  std::istringstream fields(locked.out);
  std::int64_t first_token = 0, lock_rev = 0;
  std::string lock_key;
  fields >> first_token >> lock_key >> lock_rev;
  CHECK(first_token > 0);
  CHECK(lock_key.rfind("L/", 0) == 0);
  CHECK(lock_rev == first_token);  // uncontended: acquired by the create itself
  CommandResult again = Ctl(c, {"lock", "L", "--", "sh", "-c", script});
  std::int64_t second_token = 0;
  std::istringstream(again.out) >> second_token;
  CHECK(second_token > first_token);  // fencing tokens increase across holders
  CHECK(CtlOk(c, {"get", "L/", "--prefix", "--count-only"}) == "0\n");  // unlocked after

  // The session is lost (its lease revoked) while the command runs: the command gets SIGTERM.
  const std::string marker = TempPath(c, "lock-key");
  auto holder = std::async(std::launch::async, [&] {
    return Ctl(c, {"lock", "--ttl=3", "--kill-grace=2s", "Lost", "--", "sh", "-c",
                   "echo $ETCD_LOCK_KEY > " + marker + "; exec sleep 60"});
  });
  std::string key;
  REQUIRE(Eventually(
      [&] {
        std::ifstream(marker) >> key;
        return !key.empty();
      },
      seconds(20), kProcessPoll));
  const std::string lock_lease = key.substr(key.find('/') + 1);
  CHECK(CtlOk(c, {"lease", "revoke", lock_lease}).find("revoked") != std::string::npos);
  CommandResult lost = holder.get();
  INFO(lost.Describe());
  CHECK(lost.exit_code == 128 + SIGTERM);
  CHECK(lost.err.find("Error: lock " + key + " lost: session expired") != std::string::npos);

  // elect: campaign (held 2 s) while an observer prints the leader's proposal.
  auto campaign = std::async(std::launch::async, [&] {
    return Ctl(c, {"elect", "E", "alpha", "--ttl=5", "--hold=2s"});
  });
  const std::string observed = CtlOk(c, {"elect", "-l", "E", "--max-events", "1"});
  CHECK(observed.rfind("E/", 0) == 0);
  CHECK(observed.find("\nalpha\n") != std::string::npos);
  CommandResult campaigned = campaign.get();
  INFO(campaigned.Describe());
  CHECK(campaigned.exit_code == 0);
  CHECK(campaigned.out.find("\nalpha\n") != std::string::npos);
  CHECK(CtlOk(c, {"get", "E/", "--prefix", "--count-only"}) == "0\n");  // resigned

  // Long-running commands end cleanly (exit 0) on SIGINT/SIGTERM: a lock held without a command
  // (released), a watch, a keep-alive loop, a campaign without --hold (resigned).
  {
    const std::string log = TempPath(c, "held.log");
    test::ChildProcess lock = SpawnCtl(c, {"lock", "Held"}, log);
    REQUIRE(LogShows(log, "Held/"));
    CHECK(CtlOk(c, {"get", "Held/", "--prefix", "--count-only"}) == "1\n");
    lock.Signal(SIGINT);
    CHECK(lock.WaitExit(seconds(10)) == std::optional<int>(0));
    CHECK(CtlOk(c, {"get", "Held/", "--prefix", "--count-only"}) == "0\n");
  }
  {
    const auto rev =
        ParseJson<etcdserverpb::PutResponse>(CtlOk(c, {"put", "iw", "v", "-w", "json"}))
            .header()
            .revision();
    const std::string log = TempPath(c, "watch.log");
    test::ChildProcess watch = SpawnCtl(c, {"watch", "iw", "--rev", std::to_string(rev)}, log);
    REQUIRE(LogShows(log, "PUT\niw\nv\n"));
    watch.Signal(SIGTERM);
    CHECK(watch.WaitExit(seconds(10)) == std::optional<int>(0));
  }
  {
    const std::string lease_id = LeaseIdFrom(CtlOk(c, {"lease", "grant", "3"}));
    const std::string log = TempPath(c, "keepalive.log");
    test::ChildProcess keep = SpawnCtl(c, {"lease", "keep-alive", lease_id}, log);
    REQUIRE(LogShows(log, "lease " + lease_id + " keepalived with TTL(3)"));
    keep.Signal(SIGINT);
    CHECK(keep.WaitExit(seconds(10)) == std::optional<int>(0));
  }
  {
    const std::string log = TempPath(c, "elect.log");
    test::ChildProcess elect = SpawnCtl(c, {"elect", "E2", "beta", "--ttl=5"}, log);
    REQUIRE(LogShows(log, "\nbeta\n"));
    elect.Signal(SIGINT);
    CHECK(elect.WaitExit(seconds(10)) == std::optional<int>(0));
    CHECK(CtlOk(c, {"get", "E2/", "--prefix", "--count-only"}) == "0\n");
  }

  // jobs views over the job runner's layout (client/README.md "Key layout", prefix epoch-jobs/).
  const std::string job_lease = LeaseIdFrom(CtlOk(c, {"lease", "grant", "60"}));
  CHECK(CtlOk(c, {"put", "epoch-jobs/jobs/j1", "stages=a,b\npayload"}) == "OK\n");
  CHECK(CtlOk(c, {"put", "epoch-jobs/epoch/j1", "epoch=2 token=7"}) == "OK\n");
  const std::string hold =
      CtlOk(c, {"put", "epoch-jobs/lock/j1/" + job_lease.substr(job_lease.find_first_not_of('0')),
                "", "--lease=" + job_lease, "-w", "json"});
  const auto hold_rev = ParseJson<etcdserverpb::PutResponse>(hold).header().revision();
  CHECK(CtlOk(c, {"put", "epoch-jobs/dlq/j2", "stages=x"}) == "OK\n");
  CHECK(CtlOk(c, {"jobs", "list"}) ==
        fmt::format("found 1 jobs under epoch-jobs/jobs/\nj1, stages=a,b, epoch=2, last_token=7, "
                    "holder={} (token {})\n",
                    job_lease, hold_rev));
  const std::string job = CtlOk(c, {"jobs", "show", "j1"});
  CHECK(job.find("state:        queued or running") != std::string::npos);
  CHECK(job.find(fmt::format("holder:       lease {} token {} (0 waiting)", job_lease, hold_rev)) !=
        std::string::npos);
  CHECK(job.find("ms on the cluster clock") != std::string::npos);
  CHECK(CtlOk(c, {"jobs", "dlq"}).find("j2, stages=x, epoch=0, last_token=-, holder=-") !=
        std::string::npos);
  CHECK(CtlOk(c, {"jobs", "show", "j2"}).find("dead-lettered") != std::string::npos);
  CHECK(CtlOk(c, {"jobs", "--prefix", "other/", "list"}) == "found 0 jobs under other/jobs/\n");
  CtlFails(c, {"jobs", "show", "nope"}, "job nope not found");

  // snapshot save (one endpoint), status of the file, a corrupted copy, restore.
  const std::string file = TempPath(c, "backup.db");
  const std::string one = c.Endpoints({0});
  CHECK(CtlOk(c, {"snapshot", "save", file}, {}, one) ==
        fmt::format("Snapshot saved at {}\n", file));
  CtlFails(c, {"snapshot", "save", file + ".2"}, "one selected node");
  const std::string info = CtlOk(c, {"snapshot", "status", file, "-w", "table"});
  CHECK(info.find("HASH") != std::string::npos);
  CHECK(info.find("TOTAL KEYS") != std::string::npos);
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  CtlFails(c, {"snapshot", "status", file}, "checksum mismatch");
  const std::string good = TempPath(c, "good.db");
  CHECK(CtlOk(c, {"snapshot", "save", good}, {}, one).find("Snapshot saved") != std::string::npos);
  const std::string restored = TempPath(c, "restored");
  CtlOk(c, {"snapshot", "restore", good, "--epochd", EPOCHD_PATH, "--name", "r1", "--data-dir",
            restored, "--initial-cluster", "r1=127.0.0.1:1", "--initial-cluster-clients",
            "r1=127.0.0.1:2", "--listen-client-urls", "127.0.0.1:2", "--listen-peer-urls",
            "127.0.0.1:1"});
  CHECK(std::filesystem::exists(std::filesystem::path(restored) / "wal"));
  CtlFails(c,
           {"snapshot", "restore", good, "--epochd", EPOCHD_PATH, "--name", "r1", "--data-dir",
            restored, "--initial-cluster", "r1=127.0.0.1:1"},
           "--restore-snapshot failed");
}

}  // namespace epoch::integration
