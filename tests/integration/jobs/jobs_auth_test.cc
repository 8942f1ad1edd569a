// The example worker as an etcd user whose role covers only its own queue's prefix, on an epochd
// with auth on and a 2-second --auth-token-ttl (so its token expires while it works): it takes
// the job lock, commits every stage and completes the job; the same user cannot read another
// queue's keys.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/etcd_errors.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"
#include "test_support.h"

namespace epoch::client {
namespace {

using test_support::FileTail;
using test_support::TempDir;

const JobKeys kQueue{"queue-a/"};
const std::string kOtherQueue = "queue-b/";

void Etcdctl(const test::TestCluster& cluster, const std::vector<std::string>& args) {
  const test::CommandResult r = cluster.Etcdctl(args);
  INFO(r.Describe());
  REQUIRE(r.exit_code == 0);
}

std::unique_ptr<Client> ClientAs(const test::TestCluster& cluster, const std::string& user,
                                 const std::string& password) {
  ClientOptions options;
  options.endpoints = {cluster.node(0).client_address()};
  options.user = user;
  options.password = password;
  auto client = Client::Create(options);
  REQUIRE(client.ok());
  return std::move(client).value();
}

}  // namespace

TEST_CASE("The example worker runs as a user whose role covers only its queue",
          "[jobs][process][auth]") {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = 1;
  options.extra_flags.insert(options.extra_flags.end(), {"--auth-token-ttl", "2"});
  auto started = test::TestCluster::Start(options);
  INFO((started.ok() ? "" : started.status().ToString()));
  REQUIRE(started.ok());
  const test::TestCluster& cluster = **started;

  Etcdctl(cluster, {"user", "add", "root:rootpw"});
  Etcdctl(cluster, {"user", "add", "worker-a:apw"});
  Etcdctl(cluster, {"role", "add", "queue-a"});
  Etcdctl(cluster,
          {"role", "grant-permission", "queue-a", "--prefix=true", "readwrite", kQueue.prefix});
  Etcdctl(cluster, {"user", "grant-role", "worker-a", "queue-a"});
  Etcdctl(cluster, {"auth", "enable"});

  auto root = ClientAs(cluster, "root", "rootpw");
  REQUIRE(root->Put(kQueue.Job("j1"), EncodeJob({"a", "b", "c"}, "payload")).ok());
  // Another queue's lock, held on a lease of its own.
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(60);
  auto other_lease = root->LeaseGrant(grant);
  REQUIRE(other_lease.ok());
  REQUIRE(root->Put(kOtherQueue + "lock/x/1", "", LeaseId(other_lease->id())).ok());

  // Three stages of 1 s each: the worker's token expires at least once while it works.
  TempDir dir("epoch-jobs-auth");
  const auto log = dir.Sub("worker.log");
  const int exit = testing::RunCommand(
      {FENCED_WORKER_PATH, "--endpoints", cluster.node(0).client_address(), "--prefix",
       kQueue.prefix, "--sqlite", dir.Sub("jobs.db"), "--worker", "wa", "--user", "worker-a",
       "--password", "apw", "--stage-ms", "1000", "--max-runtime-s", "60"},
      log);
  const std::string out = FileTail(log, 100'000);
  INFO(out);
  CHECK(exit == 0);
  CHECK(out.find("event=commit job=j1 stage=3 ") != std::string::npos);
  CHECK(out.find("event=completed job=j1 ") != std::string::npos);
  auto done = root->Get(kQueue.DoneJob("j1"));
  REQUIRE(done.ok());
  CHECK(done->has_value());

  // The same user elsewhere: refused, and the other queue's lock is untouched.
  auto worker = ClientAs(cluster, "worker-a", "apw");
  auto read = worker->Get(kOtherQueue + "lock/x/1");
  REQUIRE(!read.ok());
  CHECK(read.status().Is(ErrorId::kPermissionDenied));
  auto still = root->Get(kOtherQueue + "lock/x/1");
  REQUIRE(still.ok());
  CHECK(still->has_value());
}

}  // namespace epoch::client
