// epoch.v1.Jobs called directly against a real 3-node cluster: Acquire / Status / Release /
// ListDeadLetters on the client runner's key layout, tokens increasing across holders, a second
// acquirer refused while the job is held, a takeover after the holder's lease expired with a
// larger token, dead-lettering after N changes of hands, the epoch_jobs_* counters, and `etcdctl
// lock` on the job's lock name excluding the Jobs API's holder (and the other way round).
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <string>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "test_support.h"

namespace epoch::client {
namespace {

using std::chrono::seconds;
using test_support::Eventually;
using test_support::kProcessPoll;
using test_support::TempDir;

const JobKeys kKeys{"jobs-rpc/"};

std::unique_ptr<test::TestCluster> StartJobsCluster(int nodes = 3) {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.nodes = nodes;
  auto cluster = test::TestCluster::Start(options);
  INFO((cluster.ok() ? "" : cluster.status().ToString()));
  REQUIRE(cluster.ok());
  return std::move(cluster).value();
}

std::unique_ptr<Client> ClientOf(const test::TestCluster& cluster) {
  ClientOptions options;
  for (int i = 0; i < cluster.size(); ++i)
    options.endpoints.push_back(cluster.node(i).client_address());
  auto client = Client::Create(options);
  REQUIRE(client.ok());
  return std::move(client).value();
}

std::int64_t Grant(Client& client, std::int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  auto granted = client.LeaseGrant(request);
  REQUIRE(granted.ok());
  return granted->id();
}

// The Jobs service of one member.
class Jobs {
 public:
  Jobs(Client& client, std::size_t member) : stub_(v1::Jobs::NewStub(client.Channel(member))) {}

  struct Acquired {
    grpc::Status status;
    v1::JobAcquireResponse response;
  };
  Acquired Acquire(const std::string& job, std::int64_t lease, const std::string& holder,
                   std::uint32_t max_epochs = 0) {
    v1::JobAcquireRequest request;
    request.set_prefix(kKeys.prefix);
    request.set_job(job);
    request.set_lease(lease);
    request.set_holder(holder);
    request.set_max_epochs(max_epochs);
    Acquired out;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    out.status = stub_->Acquire(&ctx, request, &out.response);
    return out;
  }
  v1::JobStatusResponse Status(const std::string& job) {
    v1::JobStatusRequest request;
    request.set_prefix(kKeys.prefix);
    request.set_job(job);
    v1::JobStatusResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    const grpc::Status s = stub_->Status(&ctx, request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
    return response;
  }
  bool Release(const std::string& job, std::int64_t token, bool completed) {
    v1::JobReleaseRequest request;
    request.set_prefix(kKeys.prefix);
    request.set_job(job);
    request.set_fencing_token(token);
    request.set_completed(completed);
    v1::JobReleaseResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    const grpc::Status s = stub_->Release(&ctx, request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
    return response.released();
  }
  v1::ListDeadLettersResponse DeadLetters() {
    v1::ListDeadLettersRequest request;
    request.set_prefix(kKeys.prefix);
    v1::ListDeadLettersResponse response;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    REQUIRE(stub_->ListDeadLetters(&ctx, request, &response).ok());
    return response;
  }

 private:
  std::unique_ptr<v1::Jobs::Stub> stub_;
};

// The sum over the members of the /metrics sample `line_prefix` (name and labels) N.
double MetricSum(const test::TestCluster& cluster, const std::string& line_prefix) {
  double sum = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    auto page = cluster.Http(i, "/metrics");
    REQUIRE(page.ok());
    const std::size_t at = page->body.find("\n" + line_prefix + " ");
    REQUIRE(at != std::string::npos);
    sum += std::stod(page->body.substr(at + line_prefix.size() + 2));
  }
  return sum;
}

std::int64_t CreateRevision(Client& client, const std::string& key) {
  auto kv = client.Get(key);
  REQUIRE(kv.ok());
  REQUIRE(kv->has_value());
  return (*kv)->create_revision();
}

}  // namespace

TEST_CASE("Jobs RPCs: acquire, status, release, takeover after expiry, dead letters",
          "[jobs][rpc]") {
  auto cluster = StartJobsCluster();
  auto client = ClientOf(*cluster);
  Jobs leader_side(*client, 0);
  Jobs follower_side(*client, 1);
  REQUIRE(client->Put(kKeys.Job("a"), EncodeJob({"x"}, "payload")).ok());

  const std::int64_t lease_a = Grant(*client, 30);
  const std::int64_t lease_b = Grant(*client, 30);
  auto first = follower_side.Acquire("a", lease_a, "worker-a");
  INFO(first.status.error_message());
  REQUIRE(first.status.ok());
  REQUIRE(first.response.acquired());
  const std::int64_t token_a = first.response.fencing_token();
  CHECK(first.response.epoch_count() == 1);
  CHECK(first.response.key() == kKeys.Job("a"));
  const std::string lock_key =
      kKeys.LockName("a") + "/" + fmt::format("{:x}", static_cast<std::uint64_t>(lease_a));
  CHECK(CreateRevision(*client, lock_key) == token_a);
  CHECK((*client->Get(kKeys.Epoch("a")))->value() == fmt::format("epoch=1 token={}", token_a));

  // The same holder again: the same token, not counted twice.
  auto again = leader_side.Acquire("a", lease_a, "worker-a");
  REQUIRE(again.status.ok());
  CHECK(again.response.acquired());
  CHECK(again.response.fencing_token() == token_a);
  CHECK(again.response.epoch_count() == 1);

  // Held: a second acquirer is refused and told who holds it.
  auto refused = leader_side.Acquire("a", lease_b, "worker-b");
  REQUIRE(refused.status.ok());
  CHECK_FALSE(refused.response.acquired());
  CHECK(refused.response.holder() == "worker-a");

  v1::JobStatusResponse status = follower_side.Status("a");
  CHECK(status.exists());
  CHECK(status.lease() == lease_a);
  CHECK(status.holder() == "worker-a");
  CHECK(status.fencing_token() == token_a);
  CHECK(status.epoch_count() == 1);
  CHECK(status.lease_deadline_cluster_ms() > 0);
  CHECK_FALSE(status.dead_lettered());
  CHECK_FALSE(status.completed());

  // Only the current token releases.
  CHECK_FALSE(leader_side.Release("a", token_a + 1000, false));
  CHECK(leader_side.Release("a", token_a, false));
  CHECK(follower_side.Status("a").lease() == 0);

  // A holder whose lease expires loses the job; the next one gets a larger token.
  const std::int64_t short_lease = Grant(*client, 2);
  auto second = leader_side.Acquire("a", short_lease, "worker-short");
  REQUIRE(second.status.ok());
  REQUIRE(second.response.acquired());
  const std::int64_t token_short = second.response.fencing_token();
  CHECK(token_short > token_a);
  CHECK(second.response.epoch_count() == 2);
  REQUIRE(Eventually([&] { return follower_side.Status("a").lease() == 0; }, seconds(20),
                     kProcessPoll));
  auto third = follower_side.Acquire("a", lease_b, "worker-b");
  REQUIRE(third.status.ok());
  REQUIRE(third.response.acquired());
  CHECK(third.response.fencing_token() > token_short);
  CHECK(third.response.epoch_count() == 3);
  // The expired holder cannot release (or complete) it any more.
  CHECK_FALSE(leader_side.Release("a", token_short, true));

  // Completion: out of the queue, recorded under done/, never handed out again.
  CHECK(leader_side.Release("a", third.response.fencing_token(), true));
  status = leader_side.Status("a");
  CHECK_FALSE(status.exists());
  CHECK(status.completed());
  CHECK((*client->Get(kKeys.DoneJob("a")))->value() ==
        fmt::format("epoch=3 token={}", third.response.fencing_token()));
  auto gone = leader_side.Acquire("a", lease_a, "worker-a");
  CHECK(gone.status.error_code() == grpc::StatusCode::NOT_FOUND);

  // Dead letters: with max_epochs = 1 the third holder's acquisition moves the job to dlq/.
  REQUIRE(client->Put(kKeys.Job("p"), EncodeJob({"x"}, "poison")).ok());
  std::int64_t previous = 0;
  for (int holder = 1; holder <= 2; ++holder) {
    auto got = leader_side.Acquire("p", lease_a, "w", 1);
    REQUIRE(got.status.ok());
    REQUIRE(got.response.acquired());
    CHECK(got.response.fencing_token() > previous);
    CHECK(got.response.epoch_count() == static_cast<std::uint64_t>(holder));
    previous = got.response.fencing_token();
    REQUIRE(leader_side.Release("p", previous, false));
  }
  auto dead = follower_side.Acquire("p", lease_b, "w", 1);
  REQUIRE(dead.status.ok());
  CHECK_FALSE(dead.response.acquired());
  CHECK(dead.response.dead_lettered());
  CHECK(dead.response.epoch_count() == 3);
  CHECK_FALSE(client->Get(kKeys.Job("p"))->has_value());
  CHECK((*client->Get(kKeys.DlqJob("p")))->value() == EncodeJob({"x"}, "poison"));
  status = leader_side.Status("p");
  CHECK(status.dead_lettered());
  CHECK(status.lease() == 0);  // the dead-lettering acquisition released the lock
  v1::ListDeadLettersResponse letters = follower_side.DeadLetters();
  REQUIRE(letters.jobs_size() == 1);
  CHECK(letters.jobs(0).job() == "p");
  CHECK(letters.jobs(0).dead_lettered());
  CHECK(letters.jobs(0).epoch_count() == 3);
  CHECK(leader_side.Acquire("p", lease_a, "w", 1).status.error_code() ==
        grpc::StatusCode::NOT_FOUND);

  // Counted where each call was served: 5 holders counted (3 of "a", 2 of "p"), 4 changes of
  // hands (2 of "a", "p"'s second holder and its dead-lettering acquisition), 1 dead letter.
  CHECK(MetricSum(*cluster, "epoch_jobs_acquired_total") == 5);
  CHECK(MetricSum(*cluster, "epoch_jobs_epoch_changes_total") == 4);
  CHECK(MetricSum(*cluster, "epoch_jobs_dead_lettered_total") == 1);
  CHECK(MetricSum(*cluster, "epoch_jobs_released_total{completed=\"true\"}") == 1);
  CHECK(MetricSum(*cluster, "epoch_jobs_released_total{completed=\"false\"}") == 3);
}

TEST_CASE("Jobs RPCs: refused without a lease or with a bad id", "[jobs][rpc]") {
  auto cluster = StartJobsCluster(1);
  auto client = ClientOf(*cluster);
  Jobs jobs(*client, 0);
  CHECK(jobs.Acquire("a", 0, "w").status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(jobs.Acquire("a/b", 1, "w").status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  REQUIRE(client->Put(kKeys.Job("a"), EncodeJob({"x"}, "")).ok());
  // An unknown lease: etcd's error, and nothing left under the lock name.
  auto unknown = jobs.Acquire("a", 0x7777, "w");
  CHECK(unknown.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(jobs.Status("a").lease() == 0);
  CHECK(jobs.Status("a").epoch_count() == 0);
}

TEST_CASE("etcdctl lock on a job's lock name excludes the Jobs API holder, both ways",
          "[jobs][rpc][mutex]") {
  auto cluster = StartJobsCluster();
  auto client = ClientOf(*cluster);
  Jobs jobs(*client, 0);
  TempDir dir("epoch-jobs-rpc");
  REQUIRE(client->Put(kKeys.Job("l"), EncodeJob({"x"}, "")).ok());
  const std::int64_t lease = Grant(*client, 30);
  auto held = jobs.Acquire("l", lease, "api");
  REQUIRE(held.status.ok());
  REQUIRE(held.response.acquired());

  // etcdctl queues behind the API's holder and gets the lock only once it is released.
  testing::EtcdctlLock queued(test::kEtcdctlPath, cluster->Endpoints(), kKeys.LockName("l"),
                              dir.path());
  REQUIRE(Eventually(
      [&] {
        etcdserverpb::RangeRequest range;
        range.set_key(kKeys.LockName("l") + "/");
        range.set_range_end(PrefixRangeEnd(kKeys.LockName("l") + "/"));
        range.set_count_only(true);
        auto r = client->Range(range);
        return r.ok() && r->count() == 2;
      },
      seconds(20), kProcessPoll));
  CHECK_FALSE(queued.Holds());
  REQUIRE(jobs.Release("l", held.response.fencing_token(), false));
  REQUIRE(Eventually([&] { return queued.Holds(); }, seconds(20), kProcessPoll));
  CHECK(queued.Rev() > held.response.fencing_token());

  // While etcdctl holds it, the API refuses; once etcdctl lets go the API takes it again.
  auto refused = jobs.Acquire("l", lease, "api");
  REQUIRE(refused.status.ok());
  CHECK_FALSE(refused.response.acquired());
  queued.Release();
  REQUIRE(Eventually([&] { return !queued.process->Running(); }, seconds(20), kProcessPoll));
  auto retaken = jobs.Acquire("l", lease, "api");
  REQUIRE(retaken.status.ok());
  CHECK(retaken.response.acquired());
  CHECK(retaken.response.fencing_token() > queued.Rev());
  CHECK(retaken.response.epoch_count() == 2);
}

}  // namespace epoch::client
