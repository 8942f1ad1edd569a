// The server-side Lock service (v3lockpb.Lock) against a real 3-node cluster: owner key and
// fencing token (trailing metadata `epoch-fencing-token` = the key's create_revision), tokens
// strictly increasing across holders, etcd's errors, a waiter released when the holder's lease is
// revoked (waiting on a follower), a waiter whose own lease expires, and a cancelled waiter whose
// key is deleted.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "epoch/etcd_errors.h"
#include "recipe_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

std::int64_t CreateRevision(TestCluster& cluster, int node, const std::string& key) {
  etcdserverpb::RangeResponse r = MustRange(cluster, node, key);
  REQUIRE(r.kvs_size() == 1);
  return r.kvs(0).create_revision();
}

std::size_t QueueLength(TestCluster& cluster, int node, const std::string& prefix) {
  auto r = RangePrefix(cluster.Channel(node), prefix);
  return r ? static_cast<std::size_t>(r->kvs_size()) : 0;
}

TEST_CASE("Lock service: owner key and fencing token, strictly increasing across holders",
          "[integration][lock]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();

  std::int64_t previous_token = 0;
  for (int node : {*leader, follower, *leader}) {
    const std::int64_t lease = GrantLease(cluster->Channel(node), 30);
    REQUIRE(lease != 0);
    LockOutcome locked = Lock(cluster->Channel(node), "svc/a", lease);
    INFO("via node " << node << ": " << locked.status.error_message());
    REQUIRE(locked.status.ok());
    CHECK(locked.key == fmt::format("svc/a/{:x}", static_cast<std::uint64_t>(lease)));
    CHECK(locked.token == CreateRevision(*cluster, node, locked.key));
    CHECK(locked.token > previous_token);
    CHECK(locked.header_revision >= locked.token);
    previous_token = locked.token;
    REQUIRE(Unlock(cluster->Channel(node), locked.key).ok());
    CHECK(MustRange(*cluster, node, locked.key).kvs_size() == 0);
  }
}

TEST_CASE("Lock service: etcd errors for an unknown lease and an empty unlock key",
          "[integration][lock]") {
  auto cluster = StartCluster(1);
  LockOutcome locked = Lock(cluster->Channel(0), "svc/b", 0x7777);
  CHECK(locked.status.error_code() == grpc::StatusCode::NOT_FOUND);
  CHECK(locked.status.error_message() == epoch::etcd_errors::kLeaseNotFound.message);
  grpc::Status unlocked = Unlock(cluster->Channel(0), "");
  CHECK(unlocked.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(unlocked.error_message() == epoch::etcd_errors::kEmptyKey.message);
  // The failed Lock left nothing behind.
  CHECK(QueueLength(*cluster, 0, "svc/b/") == 0);
}

TEST_CASE("Lock service: a waiter on a follower gets the lock when the holder's lease is revoked",
          "[integration][lock]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  const std::int64_t holder_lease = GrantLease(cluster->Channel(*leader), 30);
  const std::int64_t waiter_lease = GrantLease(cluster->Channel(follower), 30);
  REQUIRE(holder_lease != 0);
  REQUIRE(waiter_lease != 0);
  LockOutcome holder = Lock(cluster->Channel(*leader), "svc/c", holder_lease);
  REQUIRE(holder.status.ok());

  std::atomic<bool> done{false};
  LockOutcome waiter;
  std::thread t([&] {
    waiter = Lock(cluster->Channel(follower), "svc/c", waiter_lease);
    done = true;
  });
  // The waiter queued its key and keeps waiting while the holder's key exists.
  const bool queued = Eventually([&] { return QueueLength(*cluster, follower, "svc/c/") == 2; },
                                 std::chrono::seconds(10), kProcessPoll);
  const bool waiting_while_held = !done.load();
  grpc::Status revoked = RevokeLease(cluster->Channel(*leader), holder_lease);
  t.join();
  REQUIRE(queued);
  CHECK(waiting_while_held);
  REQUIRE(revoked.ok());
  INFO(waiter.status.error_message());
  REQUIRE(waiter.status.ok());
  CHECK(waiter.key == fmt::format("svc/c/{:x}", static_cast<std::uint64_t>(waiter_lease)));
  CHECK(waiter.token > holder.token);
  CHECK(waiter.token == CreateRevision(*cluster, *leader, waiter.key));
  CHECK(QueueLength(*cluster, *leader, "svc/c/") == 1);
}

TEST_CASE("Lock service: a waiter whose lease expires while waiting fails with session expired",
          "[integration][lock]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const std::int64_t holder_lease = GrantLease(cluster->Channel(*leader), 30);
  const std::int64_t short_lease = GrantLease(cluster->Channel(*leader), 1);  // never renewed
  REQUIRE(holder_lease != 0);
  REQUIRE(short_lease != 0);
  REQUIRE(Lock(cluster->Channel(*leader), "svc/d", holder_lease).status.ok());

  const auto start = std::chrono::steady_clock::now();
  LockOutcome waiter = Lock(cluster->Channel(*leader), "svc/d", short_lease);
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waiter.status.error_code() == grpc::StatusCode::UNKNOWN);
  CHECK(waiter.status.error_message() == "session expired");
  // It failed when its own key went, not at the 20 s call deadline.
  CHECK(waited < std::chrono::seconds(10));
  CHECK(QueueLength(*cluster, *leader, "svc/d/") == 1);
}

TEST_CASE("Lock service: a cancelled waiter stops waiting and its key is deleted",
          "[integration][lock]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  const std::int64_t holder_lease = GrantLease(cluster->Channel(*leader), 30);
  const std::int64_t waiter_lease = GrantLease(cluster->Channel(*leader), 30);
  REQUIRE(Lock(cluster->Channel(*leader), "svc/e", holder_lease).status.ok());

  for (int node : {*leader, follower}) {
    // The client's deadline cancels the call on the server.
    LockOutcome waiter =
        Lock(cluster->Channel(node), "svc/e", waiter_lease, std::chrono::milliseconds(700));
    CHECK(waiter.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    CHECK(Eventually([&] { return QueueLength(*cluster, *leader, "svc/e/") == 1; },
                     std::chrono::seconds(10), kProcessPoll));
  }
  // The lock still works for the next waiter once the holder unlocks.
  auto held = RangePrefix(cluster->Channel(*leader), "svc/e/");
  REQUIRE(held);
  REQUIRE(held->kvs_size() == 1);
  REQUIRE(Unlock(cluster->Channel(*leader), held->kvs(0).key()).ok());
  LockOutcome next = Lock(cluster->Channel(*leader), "svc/e", waiter_lease);
  CHECK(next.status.ok());
}

}  // namespace
}  // namespace epoch::integration
