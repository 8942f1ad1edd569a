// Permission checks beyond KV on a 3-node cluster with auth on: a worker whose role covers only
// /jobs/q1/ takes a lock there and commits under it; it cannot lock or campaign outside its
// prefix, cannot revoke (from any member) a lease with a key of another queue attached, nor see
// that lease's keys; member changes and Hash are root only; a permission revoked while the worker
// holds its token refuses its next lock at once.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "support.h"
#include "v3electionpb/v3election.grpc.pb.h"
#include "v3lockpb/v3lock.grpc.pb.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;

const std::string kDenied(etcd_errors::kPermissionDenied.message);

// A client context carrying `token`, with a deadline.
std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!token.empty()) ctx->AddMetadata("token", token);
  return ctx;
}

std::string Token(TestCluster& cluster, int i, const std::string& name, const std::string& pw) {
  auto stub = pb::Auth::NewStub(cluster.Channel(i));
  pb::AuthenticateRequest req;
  req.set_name(name);
  req.set_password(pw);
  pb::AuthenticateResponse resp;
  grpc::Status last;
  const bool done = Eventually(
      [&] {
        last = stub->Authenticate(As("").get(), req, &resp);
        return last.ok();
      },
      std::chrono::seconds(15));
  INFO(last.error_message());
  REQUIRE(done);
  return resp.token();
}

std::int64_t GrantLease(TestCluster& cluster, int i, const std::string& token) {
  auto stub = pb::Lease::NewStub(cluster.Channel(i));
  pb::LeaseGrantRequest req;
  req.set_ttl(60);
  pb::LeaseGrantResponse resp;
  grpc::Status s = stub->LeaseGrant(As(token).get(), req, &resp);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return resp.id();
}

grpc::Status PutWithLease(TestCluster& cluster, int i, const std::string& token,
                          const std::string& key, std::int64_t lease) {
  auto stub = pb::KV::NewStub(cluster.Channel(i));
  pb::PutRequest req;
  req.set_key(key);
  req.set_value("v");
  req.set_lease(lease);
  pb::PutResponse resp;
  return stub->Put(As(token).get(), req, &resp);
}

grpc::Status Revoke(TestCluster& cluster, int i, const std::string& token, std::int64_t lease) {
  auto stub = pb::Lease::NewStub(cluster.Channel(i));
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return stub->LeaseRevoke(As(token).get(), req, &resp);
}

grpc::Status TimeToLive(TestCluster& cluster, int i, const std::string& token, std::int64_t lease,
                        bool keys, pb::LeaseTimeToLiveResponse* resp) {
  auto stub = pb::Lease::NewStub(cluster.Channel(i));
  pb::LeaseTimeToLiveRequest req;
  req.set_id(lease);
  req.set_keys(keys);
  return stub->LeaseTimeToLive(As(token).get(), req, resp);
}

grpc::Status Lock(TestCluster& cluster, int i, const std::string& token, const std::string& name,
                  std::int64_t lease, std::string* key) {
  auto stub = v3lockpb::Lock::NewStub(cluster.Channel(i));
  v3lockpb::LockRequest req;
  req.set_name(name);
  req.set_lease(lease);
  v3lockpb::LockResponse resp;
  grpc::Status s = stub->Lock(As(token).get(), req, &resp);
  if (key != nullptr) *key = resp.key();
  return s;
}

grpc::Status Campaign(TestCluster& cluster, int i, const std::string& token,
                      const std::string& name, std::int64_t lease) {
  auto stub = v3electionpb::Election::NewStub(cluster.Channel(i));
  v3electionpb::CampaignRequest req;
  req.set_name(name);
  req.set_lease(lease);
  req.set_value("me");
  v3electionpb::CampaignResponse resp;
  return stub->Campaign(As(token).get(), req, &resp);
}

TEST_CASE("auth: a worker locks and commits in its prefix and touches no other queue",
          "[integration][auth]") {
  auto cluster = StartCluster(3);
  EtcdctlOk(*cluster, {"user", "add", "root:rootpw"});
  EtcdctlOk(*cluster, {"user", "add", "worker:workpw"});
  EtcdctlOk(*cluster, {"role", "add", "q1"});
  EtcdctlOk(*cluster,
            {"role", "grant-permission", "q1", "--prefix=true", "readwrite", "/jobs/q1/"});
  EtcdctlOk(*cluster, {"user", "grant-role", "worker", "q1"});
  EtcdctlOk(*cluster, {"auth", "enable"});
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % 3;
  const std::string root = Token(*cluster, 0, "root", "rootpw");
  const std::string worker = Token(*cluster, 0, "worker", "workpw");

  // The worker's lock in its prefix, and a commit under it (the lock key compared in the txn).
  const std::int64_t mine = GrantLease(*cluster, follower, worker);
  std::string lock_key;
  grpc::Status locked = Lock(*cluster, follower, worker, "/jobs/q1/lock", mine, &lock_key);
  INFO(locked.error_message());
  REQUIRE(locked.ok());
  CHECK(lock_key.starts_with("/jobs/q1/lock/"));
  {
    auto kv = pb::KV::NewStub(cluster->Channel(follower));
    pb::TxnRequest txn;
    pb::Compare* held = txn.add_compare();
    held->set_key(lock_key);
    held->set_target(pb::Compare::CREATE);
    held->set_result(pb::Compare::GREATER);
    held->set_create_revision(0);
    pb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key("/jobs/q1/result");
    put->set_value("done");
    pb::TxnResponse resp;
    grpc::Status s = kv->Txn(As(worker).get(), txn, &resp);
    INFO(s.error_message());
    REQUIRE(s.ok());
    CHECK(resp.succeeded());
  }
  // Unlock: write on the lock key; a key outside the prefix is refused.
  {
    auto lock = v3lockpb::Lock::NewStub(cluster->Channel(0));
    v3lockpb::UnlockRequest req;
    v3lockpb::UnlockResponse resp;
    req.set_key("/jobs/q2/lock/1");
    CHECK(lock->Unlock(As(worker).get(), req, &resp).error_message() == kDenied);
    req.set_key(lock_key);
    CHECK(lock->Unlock(As(worker).get(), req, &resp).ok());
  }

  // Outside its prefix: no lock, no campaign, no leader query.
  CHECK(Lock(*cluster, 0, worker, "/jobs/q2/lock", mine, nullptr).error_message() == kDenied);
  CHECK(Campaign(*cluster, 0, worker, "/elect/x", mine).error_message() == kDenied);
  CHECK(Campaign(*cluster, 0, worker, "/jobs/q1/elect", mine).ok());
  {
    auto election = v3electionpb::Election::NewStub(cluster->Channel(0));
    v3electionpb::LeaderRequest req;
    req.set_name("/elect/x");
    v3electionpb::LeaderResponse resp;
    CHECK(election->Leader(As(worker).get(), req, &resp).error_message() == kDenied);
  }

  // Another queue's lease: not revocable by the worker on any member, its keys not shown.
  const std::int64_t other = GrantLease(*cluster, 0, root);
  REQUIRE(PutWithLease(*cluster, 0, root, "/jobs/q2/held", other).ok());
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    CHECK(Revoke(*cluster, i, worker, other).error_message() == kDenied);
  }
  pb::LeaseTimeToLiveResponse ttl;
  CHECK(TimeToLive(*cluster, 0, worker, other, true, &ttl).error_message() == kDenied);
  REQUIRE(TimeToLive(*cluster, 0, worker, other, false, &ttl).ok());
  CHECK(ttl.ttl() > 0);
  REQUIRE(TimeToLive(*cluster, 0, root, other, true, &ttl).ok());
  CHECK(ttl.keys_size() == 1);
  // Its own lease, revoked through a follower: the forwarded revoke carries the worker.
  REQUIRE(PutWithLease(*cluster, 0, worker, "/jobs/q1/mine", mine).ok());
  grpc::Status revoked = Revoke(*cluster, follower, worker, mine);
  INFO(revoked.error_message());
  CHECK(revoked.ok());
  REQUIRE(TimeToLive(*cluster, 0, root, other, false, &ttl).ok());
  CHECK(ttl.ttl() > 0);

  // Root only: member changes and Hash.
  {
    auto cluster_stub = pb::Cluster::NewStub(cluster->Channel(0));
    pb::MemberAddRequest add;
    add.add_peerurls("http://127.0.0.9:2380");
    pb::MemberAddResponse add_resp;
    CHECK(cluster_stub->MemberAdd(As(worker).get(), add, &add_resp).error_message() == kDenied);
    pb::MemberRemoveRequest remove;
    remove.set_id(1);
    pb::MemberRemoveResponse remove_resp;
    CHECK(cluster_stub->MemberRemove(As(worker).get(), remove, &remove_resp).error_message() ==
          kDenied);
    auto maintenance = pb::Maintenance::NewStub(cluster->Channel(0));
    pb::HashRequest hash;
    pb::HashResponse hash_resp;
    CHECK(maintenance->Hash(As(worker).get(), hash, &hash_resp).error_message() == kDenied);
  }

  // The permission revoked while the worker holds its token: its next lock is refused at once.
  EtcdctlOk(*cluster, {"--user=root:rootpw", "role", "revoke-permission", "q1", "--prefix=true",
                       "/jobs/q1/"});
  const std::int64_t again = GrantLease(*cluster, 0, worker);
  for (int i = 0; i < 3; ++i) {
    INFO("node " << i);
    CHECK(Eventually(
        [&] {
          return Lock(*cluster, i, worker, "/jobs/q1/lock", again, nullptr).error_message() ==
                 kDenied;
        },
        std::chrono::seconds(5)));
  }
}

}  // namespace
}  // namespace epoch::integration
