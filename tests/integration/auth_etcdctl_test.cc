// etcd's auth end to end with stock etcdctl 3.4 against a 3-node cluster: users, roles, prefix
// permissions, `auth enable`; a user reads and writes its prefix and is refused elsewhere with
// etcd's messages; unauthenticated and wrongly authenticated requests are refused; a permission
// revoked while a user works takes effect at once; a token is valid on every member and survives
// a leader kill; the auth state survives a full restart and reaches a member through a snapshot;
// `auth disable` restores open access.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;

// Whether `condition` holds within `timeout` (polled).
template <typename Condition>
bool Within(std::chrono::seconds timeout, Condition condition) {
  return Eventually(condition, timeout);
}

std::string Msg(const EtcdError& e) { return std::string(e.message); }

std::vector<std::string> As(const std::string& user, std::vector<std::string> args) {
  args.insert(args.begin(), "--user=" + user);
  return args;
}

// Authenticate through node i's Auth service; REQUIREs success (retried while there is no
// leader) and returns the token.
std::string Token(TestCluster& cluster, int i, const std::string& name, const std::string& pw) {
  auto stub = pb::Auth::NewStub(cluster.Channel(i));
  pb::AuthenticateRequest req;
  req.set_name(name);
  req.set_password(pw);
  pb::AuthenticateResponse resp;
  grpc::Status last;
  const bool done = Within(std::chrono::seconds(15), [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    last = stub->Authenticate(&ctx, req, &resp);
    return last.ok();
  });
  INFO(last.error_message());
  REQUIRE(done);
  REQUIRE(!resp.token().empty());
  return resp.token();
}

grpc::Status GetWithToken(TestCluster& cluster, int i, const std::string& token,
                          const std::string& key) {
  auto stub = pb::KV::NewStub(cluster.Channel(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ctx.AddMetadata("token", token);
  pb::RangeRequest req;
  req.set_key(key);
  pb::RangeResponse resp;
  return stub->Range(&ctx, req, &resp);
}

void SetUpUsers(TestCluster& cluster) {
  CHECK(EtcdctlOk(cluster, {"user", "add", "root:rootpw"}).find("User root created") !=
        std::string::npos);
  EtcdctlOk(cluster, {"user", "add", "worker:workpw"});
  EtcdctlFails(cluster, {"user", "add", "worker:again"}, Msg(etcd_errors::kUserAlreadyExist));
  EtcdctlOk(cluster, {"role", "add", "jobs"});
  EtcdctlOk(cluster, {"role", "grant-permission", "jobs", "--prefix=true", "readwrite", "/jobs/"});
  EtcdctlOk(cluster, {"role", "grant-permission", "jobs", "read", "/config"});
  EtcdctlFails(cluster, {"user", "grant-role", "nobody", "jobs"}, Msg(etcd_errors::kUserNotFound));
  EtcdctlFails(cluster, {"user", "grant-role", "worker", "nope"}, Msg(etcd_errors::kRoleNotFound));
  EtcdctlOk(cluster, {"user", "grant-role", "worker", "jobs"});
  EtcdctlOk(cluster, {"put", "/config", "c1"});
  EtcdctlOk(cluster, {"put", "/other", "o1"});
  // etcdctl adds the root role and grants it to root when AuthEnable asks for it.
  CHECK(EtcdctlOk(cluster, {"auth", "enable"}).find("Authentication Enabled") != std::string::npos);
}

TEST_CASE("etcdctl: users, roles and prefix permissions once auth is enabled",
          "[integration][etcdctl][auth]") {
  // Every etcdctl here comes from 127.0.0.1, and each refused password costs that address a
  // token of the brute-force limiter (auth_failure_limiter.h, 5 by default, one back per 10 s),
  // several per etcdctl as it retries: a fast run would be blocked by the limiter, not by etcd's
  // rules, which are what this test checks. The limiter has tests of its own.
  auto cluster = StartCluster(3, {"--auth-failure-burst", "100"});
  SetUpUsers(*cluster);
  const std::string worker = "worker:workpw";

  // Nobody: etcd's "user name is empty"; a wrong password: etcd's authentication failure.
  EtcdctlFails(*cluster, {"get", "/jobs/1"}, Msg(etcd_errors::kUserEmpty));
  EtcdctlFails(*cluster, As("worker:wrong", {"get", "/jobs/1"}), Msg(etcd_errors::kAuthFailed));
  EtcdctlFails(*cluster, As("ghost:pw", {"get", "/jobs/1"}), Msg(etcd_errors::kAuthFailed));

  // The worker's prefix: read and write; /config: read only; elsewhere: nothing.
  EtcdctlOk(*cluster, As(worker, {"put", "/jobs/1", "v1"}));
  CHECK(EtcdctlOk(*cluster, As(worker, {"get", "/jobs/1", "--print-value-only"})) == "v1\n");
  CHECK(EtcdctlOk(*cluster, As(worker, {"get", "/jobs/", "--prefix", "--keys-only"}))
            .find("/jobs/1") != std::string::npos);
  CHECK(EtcdctlOk(*cluster, As(worker, {"get", "/config", "--print-value-only"})) == "c1\n");
  const std::string denied = Msg(etcd_errors::kPermissionDenied);
  EtcdctlFails(*cluster, As(worker, {"put", "/config", "x"}), denied);
  EtcdctlFails(*cluster, As(worker, {"get", "/other"}), denied);
  EtcdctlFails(*cluster, As(worker, {"get", "/", "--prefix"}), denied);
  EtcdctlFails(*cluster, As(worker, {"del", "/other"}), denied);
  // A txn is checked on every compare and op of both branches.
  EtcdctlFails(*cluster, As(worker, {"txn"}), denied,
               "value(\"/jobs/1\") = \"v1\"\n\nput /jobs/2 ok\n\nput /other x\n\n");
  EtcdctlOk(*cluster, As(worker, {"txn"}),
            "value(\"/jobs/1\") = \"v1\"\n\nput /jobs/2 ok\n\nget /config\n\n");
  // Root only: compaction and auth administration.
  EtcdctlFails(*cluster, As(worker, {"compaction", "2"}), denied);
  EtcdctlFails(*cluster, As(worker, {"user", "list"}), denied);
  EtcdctlFails(*cluster, As(worker, {"role", "add", "mine"}), denied);

  // Root sees everything and administers.
  const std::string root = "root:rootpw";
  CHECK(EtcdctlOk(*cluster, As(root, {"get", "/other", "--print-value-only"})) == "o1\n");
  CHECK(Lines(EtcdctlOk(*cluster, As(root, {"user", "list"}))) ==
        std::vector<std::string>{"root", "worker"});
  CHECK(Lines(EtcdctlOk(*cluster, As(root, {"role", "list"}))) ==
        std::vector<std::string>{"jobs", "root"});
  const std::string role = EtcdctlOk(*cluster, As(root, {"role", "get", "jobs"}));
  CHECK(role.find("[/jobs/, /jobs0) (prefix /jobs/)") != std::string::npos);
  CHECK(EtcdctlOk(*cluster, As(root, {"user", "get", "worker"})).find("Roles: jobs") !=
        std::string::npos);
  EtcdctlFails(*cluster, As(root, {"user", "delete", "root"}), Msg(etcd_errors::kInvalidAuthMgmt));
  EtcdctlFails(*cluster, As(root, {"user", "revoke-role", "root", "root"}),
               Msg(etcd_errors::kInvalidAuthMgmt));

  // A permission revoked while the worker holds a token: refused at once, on every member.
  const std::string token = Token(*cluster, 0, "worker", "workpw");
  // Valid on a member once it applied the Authenticate entry (node 1 may lag node 0 briefly).
  REQUIRE(Within(std::chrono::seconds(5),
                 [&] { return GetWithToken(*cluster, 1, token, "/jobs/1").ok(); }));
  EtcdctlOk(*cluster, As(root, {"role", "revoke-permission", "jobs", "--prefix=true", "/jobs/"}));
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    CHECK(Within(std::chrono::seconds(5), [&] {
      return GetWithToken(*cluster, i, token, "/jobs/1").error_message() == denied;
    }));
  }
  EtcdctlFails(*cluster, As(worker, {"put", "/jobs/1", "v2"}), denied);

  // A changed password ends the user's sessions.
  EtcdctlOk(*cluster, As(root, {"user", "passwd", "worker", "--interactive=false"}), "newpw\n");
  CHECK(GetWithToken(*cluster, 0, token, "/config").error_message() ==
        Msg(etcd_errors::kInvalidAuthToken));
  EtcdctlFails(*cluster, As(worker, {"get", "/config"}), Msg(etcd_errors::kAuthFailed));
  EtcdctlOk(*cluster, As("worker:newpw", {"get", "/config"}));

  // Disabled by root: open access again.
  EtcdctlOk(*cluster, As(root, {"auth", "disable"}));
  CHECK(EtcdctlOk(*cluster, {"get", "/other", "--print-value-only"}) == "o1\n");
}

TEST_CASE("auth: a bad token is refused; a token survives a leader kill; auth survives a restart",
          "[integration][auth][failover]") {
  auto cluster = StartCluster(3);
  SetUpUsers(*cluster);
  CHECK(GetWithToken(*cluster, 0, "not-a-token", "/jobs/1").error_message() ==
        Msg(etcd_errors::kInvalidAuthToken));

  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int survivor = (*leader + 1) % 3;
  const std::string token = Token(*cluster, *leader, "worker", "workpw");
  REQUIRE(GetWithToken(*cluster, survivor, token, "/config").ok());
  cluster->Kill(*leader);
  REQUIRE(cluster->WaitForLeader(std::chrono::seconds(10), *leader).ok());
  grpc::Status after;
  CHECK(Within(std::chrono::seconds(10), [&] {
    after = GetWithToken(*cluster, survivor, token, "/config");
    return after.ok();
  }));
  INFO(after.error_message());
  CHECK(after.ok());

  // Every member restarted: users, roles and the enabled flag are as they were.
  REQUIRE(cluster->StartNode(*leader).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(cluster->Restart(i).ok());
  REQUIRE(cluster->WaitHealthy(std::chrono::seconds(20)).ok());
  EtcdctlFails(*cluster, {"get", "/config"}, Msg(etcd_errors::kUserEmpty));
  CHECK(EtcdctlOk(*cluster, As("worker:workpw", {"get", "/config", "--print-value-only"})) ==
        "c1\n");
  EtcdctlFails(*cluster, As("worker:workpw", {"get", "/other"}),
               Msg(etcd_errors::kPermissionDenied));
}

TEST_CASE("auth: a token works at once on a member that has not applied its Authenticate yet",
          "[integration][auth]") {
  auto cluster = StartCluster(3);
  SetUpUsers(*cluster);
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int behind = (*leader + 1) % 3;
  // The member sleeps through the Authenticate entry; the call with the new token reaches it as
  // it wakes, racing the entry's append, and must not be refused either way.
  for (int round = 0; round < 5; ++round) {
    cluster->Pause(behind);
    const std::string token = Token(*cluster, *leader, "worker", "workpw");
    cluster->Resume(behind);
    const grpc::Status got = GetWithToken(*cluster, behind, token, "/config");
    INFO("round " << round << ": " << got.error_message());
    REQUIRE(got.ok());
  }
  const std::optional<double> waited =
      cluster->Metric(behind, "epoch_auth_token_waits_total{outcome=\"applied\"}");
  INFO("calls that waited for the entry: " << waited.value_or(-1));
  CHECK(waited.has_value());
}

TEST_CASE("auth: a member that catches up from a snapshot has the cluster's users and roles",
          "[integration][auth][snapshot]") {
  // Compact after 300 entries, keeping 50: a member down for longer needs a snapshot.
  auto cluster = StartCluster(3, {"--snapshot-count", "300", "--snapshot-catchup-entries", "50"});
  SetUpUsers(*cluster);
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int behind = (*leader + 1) % 3;
  Result<pb::StatusResponse> before = cluster->NodeStatus(behind);
  REQUIRE(before.ok());
  REQUIRE(cluster->Stop(behind).ok());

  // While it is down: a new user, a permission revoked, and enough writes to compact the log.
  const std::string root = "root:rootpw";
  EtcdctlOk(*cluster, As(root, {"user", "add", "late:latepw"}));
  EtcdctlOk(*cluster, As(root, {"user", "grant-role", "late", "jobs"}));
  EtcdctlOk(*cluster, As(root, {"role", "revoke-permission", "jobs", "/config"}));
  const std::string root_token = Token(*cluster, *leader, "root", "rootpw");
  auto kv = pb::KV::NewStub(cluster->Channel(*leader));
  for (int i = 0; i < 700; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx.AddMetadata("token", root_token);
    pb::PutRequest put;
    put.set_key(fmt::format("/jobs/{:04}", i));
    put.set_value("v");
    pb::PutResponse response;
    const grpc::Status s = kv->Put(&ctx, put, &response);
    INFO("put " << i << ": " << s.error_message());
    REQUIRE(s.ok());
  }
  const double first_index = cluster->Metric(*leader, "epoch_raft_first_index").value_or(-1);
  INFO("member stopped at index " << before->raftindex() << "; the leader's log starts at "
                                  << first_index);
  REQUIRE(first_index > static_cast<double>(before->raftindex() + 1));

  REQUIRE(cluster->StartNode(behind).ok());
  const double leader_applied = cluster->Metric(*leader, "epoch_raft_applied_index").value_or(-1);
  REQUIRE(Within(std::chrono::seconds(30), [&] {
    return cluster->Metric(behind, "epoch_raft_applied_index").value_or(-1) >= leader_applied;
  }));
  CHECK(cluster->Metric(behind, "epoch_snapshots_installed_total").value_or(0) >= 1);

  // On the member itself: the user added while it was down authenticates (its password is
  // checked on this member's state), the revoked permission is refused, the prefix still works.
  const std::string late = Token(*cluster, behind, "late", "latepw");
  CHECK(GetWithToken(*cluster, behind, late, "/jobs/0001").ok());
  CHECK(GetWithToken(*cluster, behind, late, "/config").error_message() ==
        Msg(etcd_errors::kPermissionDenied));
  const std::string worker = Token(*cluster, behind, "worker", "workpw");
  CHECK(GetWithToken(*cluster, behind, worker, "/other").error_message() ==
        Msg(etcd_errors::kPermissionDenied));
}

}  // namespace
}  // namespace epoch::integration
