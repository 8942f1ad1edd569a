// etcdctl 3.4 lease commands against a real 3-node cluster (docs/etcd-compatibility.md §2): grant,
// keep-alive, timetolive --keys, list, revoke — through the leader and through a follower (which
// forwards grants, revokes and keep-alives to the leader) — and keys attached with put --lease
// disappearing at expiry, all in one revision.
#include <fmt/format.h>

#include <regex>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

// "lease 694d7c7a8a5c1f0b granted with TTL(30s)" → the hex ID; REQUIREs the format.
std::string GrantedId(const std::string& out, std::int64_t ttl_s) {
  std::smatch m;
  const std::regex re("^lease ([0-9a-f]+) granted with TTL\\((\\d+)s\\)\\n$");
  INFO("etcdctl lease grant printed: " << out);
  REQUIRE(std::regex_match(out, m, re));
  CHECK(std::stoll(m[2].str()) == ttl_s);
  return m[1].str();
}

struct TimeToLive {
  std::int64_t granted_s = 0;
  std::int64_t remaining_s = 0;
  std::string keys;  // as printed: "[a b]"
};

// Parses "lease <id> granted with TTL(30s), remaining(29s)[, attached keys([a b])]".
TimeToLive ParseTimeToLive(const std::string& out, const std::string& id) {
  std::smatch m;
  const std::regex re("^lease " + id +
                      " granted with TTL\\((\\d+)s\\), remaining\\((\\d+)s\\)(, attached "
                      "keys\\((\\[.*\\])\\))?\\n$");
  INFO("etcdctl lease timetolive printed: " << out);
  REQUIRE(std::regex_match(out, m, re));
  return TimeToLive{std::stoll(m[1].str()), std::stoll(m[2].str()), m[4].str()};
}

// The leader and one follower of a healthy cluster.
std::pair<int, int> LeaderAndFollower(TestCluster& cluster) {
  Result<int> leader = cluster.WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  return {*leader, (*leader + 1) % cluster.size()};
}

TEST_CASE("etcdctl lease grant, timetolive --keys, keep-alive, list and revoke",
          "[integration][etcdctl][lease]") {
  auto cluster = StartCluster();
  auto [leader, follower] = LeaderAndFollower(*cluster);
  const std::string via_leader = cluster->Endpoints({leader});
  const std::string via_follower = cluster->Endpoints({follower});

  const std::string a =
      GrantedId(EtcdctlOk(*cluster, {"lease", "grant", "30"}, {}, via_leader), 30);
  // Granted through a follower: forwarded to the leader, which picks the ID.
  const std::string b =
      GrantedId(EtcdctlOk(*cluster, {"lease", "grant", "60"}, {}, via_follower), 60);
  CHECK(a != b);
  CHECK(a != "0");

  EtcdctlOk(*cluster, {"put", "lk/1", "x", "--lease=" + a});
  EtcdctlOk(*cluster, {"put", "lk/2", "y", "--lease=" + a});
  EtcdctlOk(*cluster, {"put", "other", "z", "--lease=" + b});

  for (const std::string& via : {via_leader, via_follower}) {
    TimeToLive t =
        ParseTimeToLive(EtcdctlOk(*cluster, {"lease", "timetolive", a, "--keys"}, {}, via), a);
    CHECK(t.granted_s == 30);
    CHECK(t.remaining_s <= 30);
    CHECK(t.remaining_s >= 20);  // generous: the cluster clock runs in real time
    CHECK(t.keys == "[lk/1 lk/2]");
  }
  TimeToLive no_keys = ParseTimeToLive(EtcdctlOk(*cluster, {"lease", "timetolive", b}), b);
  CHECK(no_keys.granted_s == 60);

  std::vector<std::string> list = Lines(EtcdctlOk(*cluster, {"lease", "list"}));
  REQUIRE(list.size() == 3);
  CHECK(list[0] == "found 2 leases");
  CHECK(((list[1] == a && list[2] == b) || (list[1] == b && list[2] == a)));

  // keep-alive --once through the leader and through a follower (forwarded).
  CHECK(EtcdctlOk(*cluster, {"lease", "keep-alive", "--once", a}, {}, via_leader) ==
        fmt::format("lease {} keepalived with TTL(30)\n", a));
  CHECK(EtcdctlOk(*cluster, {"lease", "keep-alive", "--once", b}, {}, via_follower) ==
        fmt::format("lease {} keepalived with TTL(60)\n", b));

  // Revoke deletes both attached keys in one revision.
  auto before = ParseJson<etcdserverpb::RangeResponse>(
      EtcdctlOk(*cluster, {"get", "lk/", "--prefix", "-w", "json"}));
  REQUIRE(before.kvs_size() == 2);
  const std::int64_t rev = before.header().revision();
  CHECK(EtcdctlOk(*cluster, {"lease", "revoke", a}, {}, via_follower) ==
        fmt::format("lease {} revoked\n", a));
  auto after = ParseJson<etcdserverpb::RangeResponse>(
      EtcdctlOk(*cluster, {"get", "lk/", "--prefix", "-w", "json"}));
  CHECK(after.kvs_size() == 0);
  CHECK(after.header().revision() == rev + 1);
  CHECK(EtcdctlOk(*cluster, {"get", "other", "--print-value-only"}) == "z\n");

  // After the revoke: TTL -1 (etcdctl says "already expired"), gone from the list, and errors.
  CHECK(EtcdctlOk(*cluster, {"lease", "timetolive", a}) ==
        fmt::format("lease {} already expired\n", a));
  CHECK(Lines(EtcdctlOk(*cluster, {"lease", "list"})) ==
        std::vector<std::string>{"found 1 leases", b});
  CommandResult revoke = cluster->Etcdctl({"lease", "revoke", a});
  INFO(revoke.Describe());
  CHECK(revoke.exit_code != 0);  // etcdctl: "failed to revoke lease (<server error>)"
  CHECK(revoke.err.find("Error: failed to revoke lease (etcdserver: requested lease not found)") !=
        std::string::npos);
  EtcdctlFails(*cluster, {"put", "k", "v", "--lease=" + a},
               std::string(epoch::etcd_errors::kLeaseNotFound.message));
  CommandResult once = cluster->Etcdctl({"lease", "keep-alive", "--once", a});
  INFO(once.Describe());
  CHECK(once.exit_code != 0);  // TTL 0: clientv3 reports the lease as not found
  CHECK(once.err.find("requested lease not found") != std::string::npos);
}

TEST_CASE("etcdctl lease grant honours a requested ID and raises short TTLs",
          "[integration][etcdctl][lease]") {
  auto cluster = StartCluster();
  // etcdctl 3.4 cannot request an ID; the gRPC call can.
  auto lease = etcdserverpb::Lease::NewStub(cluster->Channel(0));
  etcdserverpb::LeaseGrantRequest request;
  request.set_id(0x1234);
  request.set_ttl(0);  // raised to the minimum (1 s with the test cluster's 150 ms floor)
  etcdserverpb::LeaseGrantResponse response;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = lease->LeaseGrant(&ctx, request, &response);
    INFO(s.error_message());
    REQUIRE(s.ok());
  }
  CHECK(response.id() == 0x1234);
  CHECK(response.ttl() == 1);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = lease->LeaseGrant(&ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
    CHECK(s.error_message() == epoch::etcd_errors::kLeaseExist.message);
  }
  {
    request.set_id(0);
    request.set_ttl(9'000'000'001);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = lease->LeaseGrant(&ctx, request, &response);
    CHECK(s.error_code() == grpc::StatusCode::OUT_OF_RANGE);
    CHECK(s.error_message() == epoch::etcd_errors::kLeaseTtlTooLarge.message);
  }
  CHECK(EtcdctlOk(*cluster, {"lease", "timetolive", "1234"}).find("granted with TTL(1s)") !=
        std::string::npos);
}

TEST_CASE("etcdctl lease keep-alive keeps a short lease and its keys alive",
          "[integration][etcdctl][lease]") {
  auto cluster = StartCluster();
  auto [leader, follower] = LeaderAndFollower(*cluster);
  const std::string id = GrantedId(EtcdctlOk(*cluster, {"lease", "grant", "2"}), 2);
  EtcdctlOk(*cluster, {"put", "kept", "v", "--lease=" + id});
  // etcdctl keep-alive runs until killed; RunCommand's timeout ends it after 5 s, which is 2.5
  // TTLs: without renewals (every TTL/3 through the follower) the key would be gone.
  CommandResult kept = test::RunEtcdctl(cluster->Endpoints({follower}), {"lease", "keep-alive", id},
                                        {}, std::chrono::seconds(5));
  CHECK(kept.timed_out);
  std::vector<std::string> lines = Lines(kept.out);
  INFO(kept.Describe());
  CHECK(lines.size() >= 5);
  for (const std::string& line : lines) {
    CHECK(line == fmt::format("lease {} keepalived with TTL(2)", id));
  }
  CHECK(EtcdctlOk(*cluster, {"get", "kept", "--print-value-only"}) == "v\n");
  (void)leader;
}

TEST_CASE("keys attached with put --lease disappear at expiry in one revision",
          "[integration][etcdctl][lease]") {
  auto cluster = StartCluster();
  const std::string id = GrantedId(EtcdctlOk(*cluster, {"lease", "grant", "1"}), 1);
  EtcdctlOk(*cluster, {"put", "exp/a", "1", "--lease=" + id});
  EtcdctlOk(*cluster, {"put", "exp/b", "2", "--lease=" + id});
  auto last = ParseJson<etcdserverpb::PutResponse>(
      EtcdctlOk(*cluster, {"put", "exp/c", "3", "-w", "json"}));
  const std::int64_t rev = last.header().revision();

  // Wait (bounded) until the lease expired: TTL 1 s on the cluster clock.
  std::string now_listed;
  Eventually(
      [&] {
        now_listed = EtcdctlOk(*cluster, {"get", "exp/", "--prefix", "--keys-only"});
        return Lines(now_listed).size() == 1;
      },
      std::chrono::seconds(15), kProcessPoll);
  REQUIRE(Lines(now_listed) == std::vector<std::string>{"exp/c"});
  auto after =
      ParseJson<etcdserverpb::RangeResponse>(EtcdctlOk(*cluster, {"get", "exp/c", "-w", "json"}));
  // One revision for both deletions, nothing else written since.
  CHECK(after.header().revision() == rev + 1);
  CHECK(Lines(EtcdctlOk(
            *cluster, {"get", "exp/", "--prefix", "--keys-only", fmt::format("--rev={}", rev)})) ==
        std::vector<std::string>{"exp/a", "exp/b", "exp/c"});
  CHECK(Lines(EtcdctlOk(*cluster, {"get", "exp/", "--prefix", "--keys-only",
                                   fmt::format("--rev={}", rev + 1)})) ==
        std::vector<std::string>{"exp/c"});
  CHECK(EtcdctlOk(*cluster, {"lease", "timetolive", id}) ==
        fmt::format("lease {} already expired\n", id));
}

}  // namespace
}  // namespace epoch::integration
