// Mutex (etcd's concurrency recipe) against a real etcd: two Epoch contenders, `etcdctl lock` as
// the other party in both directions, the post-wait key check, cancellation and timeouts.
#include "epoch/client/mutex.h"

#include <catch2/catch.hpp>
#include <future>

#include "epoch/test_support/eventually.h"
#include "etcd_server.h"

namespace epoch::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::Eventually;
using test_support::kProcessPoll;

std::unique_ptr<Client> NewClient(std::vector<std::string> endpoints) {
  ClientOptions options;
  options.endpoints = std::move(endpoints);
  auto client = Client::Create(options);
  REQUIRE(client.ok());
  return std::move(client).value();
}

std::unique_ptr<Session> NewSession(Client* client) {
  SessionConfig config;
  config.timing.ttl = seconds(10);
  auto session = Session::Create(client, config);
  REQUIRE(session.ok());
  return std::move(session).value();
}

// Keys queued under the lock's prefix.
std::int64_t QueueLength(Client& client, const std::string& prefix) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixRangeEnd(prefix));
  range.set_count_only(true);
  auto response = client.Range(range);
  REQUIRE(response.ok());
  return response->count();
}

LeaseId GrantWithoutKeepAlive(Client& client, std::int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(ttl_s);
  auto granted = client.LeaseGrant(grant);
  REQUIRE(granted.ok());
  return LeaseId(granted->id());
}

TEST_CASE("Mutex: two contenders exclude each other, tokens increase", "[client][mutex][etcd]") {
  testing::EtcdCluster etcd;
  auto client_a = NewClient(etcd.Endpoints());
  auto client_b = NewClient(etcd.Endpoints());
  auto session_a = NewSession(client_a.get());
  auto session_b = NewSession(client_b.get());
  Mutex a(client_a.get(), *session_a, "/locks/job-1");
  Mutex b(client_b.get(), *session_b, "/locks/job-1");
  CHECK(a.key() == fmt::format("/locks/job-1/{:x}", session_a->lease().value()));

  auto token_a = a.Lock();
  REQUIRE(token_a.ok());
  CHECK(*token_a == a.token());

  auto attempt = b.TryLock();
  REQUIRE(attempt.ok());
  CHECK_FALSE(attempt->has_value());
  CHECK(QueueLength(*client_a, a.prefix()) == 1);  // TryLock left the queue again

  auto waiting = std::async(std::launch::async, [&] { return b.Lock(); });
  REQUIRE(Eventually([&] { return QueueLength(*client_a, a.prefix()) == 2; }, seconds(10),
                     kProcessPoll));
  CHECK(waiting.wait_for(milliseconds(0)) == std::future_status::timeout);  // still queued

  // A guarded write inside etcd succeeds only for the owner.
  etcdserverpb::TxnRequest guarded;
  *guarded.add_compare() = a.IsOwnerCompare();
  auto* put = guarded.add_success()->mutable_request_put();
  put->set_key("/data/job-1");
  put->set_value("written by A");
  auto owner_write = client_a->Txn(guarded);
  REQUIRE(owner_write.ok());
  CHECK(owner_write->succeeded());

  REQUIRE(a.Unlock().ok());
  auto token_b = waiting.get();
  REQUIRE(token_b.ok());
  CHECK(*token_b > *token_a);
  CHECK(b.header().revision() >= token_b->value());

  auto stale_write = client_a->Txn(guarded);  // A's compare no longer holds
  REQUIRE(stale_write.ok());
  CHECK_FALSE(stale_write->succeeded());
  REQUIRE(b.Unlock().ok());
  CHECK(QueueLength(*client_a, a.prefix()) == 0);
}

TEST_CASE("Mutex and etcdctl lock exclude each other on the same name", "[client][mutex][etcd]") {
  testing::EtcdCluster etcd;
  test_support::TempDir dir("epoch-mutex");
  auto client = NewClient(etcd.Endpoints());
  auto session = NewSession(client.get());
  Mutex mutex(client.get(), *session, "shared-lock");

  SECTION("etcdctl holds first: Epoch waits, then gets a larger token") {
    testing::EtcdctlLock other(testing::EtcdctlBinary(), etcd.Endpoint(0), "shared-lock",
                               dir.path());
    REQUIRE(Eventually([&] { return other.Holds(); }, seconds(20), kProcessPoll));
    CHECK(other.Key().rfind("shared-lock/", 0) == 0);  // same key layout as ours
    auto attempt = mutex.TryLock();
    REQUIRE(attempt.ok());
    CHECK_FALSE(attempt->has_value());

    auto waiting = std::async(std::launch::async, [&] { return mutex.Lock(); });
    REQUIRE(Eventually([&] { return QueueLength(*client, "shared-lock/") == 2; }, seconds(10),
                       kProcessPoll));
    CHECK(waiting.wait_for(milliseconds(0)) == std::future_status::timeout);
    other.Release();
    auto token = waiting.get();
    REQUIRE(token.ok());
    CHECK(token->value() > other.Rev());
    REQUIRE(Eventually([&] { return !other.process->Running(); }, seconds(20), kProcessPoll));
    REQUIRE(mutex.Unlock().ok());
  }
  SECTION("Epoch holds first: etcdctl waits until Unlock") {
    auto token = mutex.Lock();
    REQUIRE(token.ok());
    testing::EtcdctlLock other(testing::EtcdctlBinary(), etcd.Endpoint(0), "shared-lock",
                               dir.path());
    REQUIRE(Eventually([&] { return QueueLength(*client, "shared-lock/") == 2; }, seconds(20),
                       kProcessPoll));
    CHECK_FALSE(other.Holds());  // queued behind us, not running its command
    REQUIRE(mutex.Unlock().ok());
    REQUIRE(Eventually([&] { return other.Holds(); }, seconds(20), kProcessPoll));
    CHECK(other.Rev() > token->value());
    other.Release();
    REQUIRE(Eventually([&] { return !other.process->Running(); }, seconds(20), kProcessPoll));
  }
}

TEST_CASE("Mutex: a waiter whose lease expired while queued does not get the lock",
          "[client][mutex][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  // Bare leases without keep-alive or session: only the post-wait key check can notice.
  const LeaseId holder_lease = GrantWithoutKeepAlive(*client, 60);
  const LeaseId waiter_lease = GrantWithoutKeepAlive(*client, 60);
  Mutex holder(client.get(), holder_lease, "/locks/jepsen");
  Mutex waiter(client.get(), waiter_lease, "/locks/jepsen");
  REQUIRE(holder.Lock().ok());
  auto waiting = std::async(std::launch::async, [&] { return waiter.Lock(); });
  REQUIRE(Eventually([&] { return QueueLength(*client, holder.prefix()) == 2; }, seconds(10),
                     kProcessPoll));
  etcdserverpb::LeaseRevokeRequest revoke;  // the waiter's lease "expires"
  revoke.set_id(waiter_lease.value());
  REQUIRE(client->LeaseRevoke(revoke).ok());
  REQUIRE(holder.Unlock().ok());
  auto result = waiting.get();
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().code() == StatusCode::kFailedPrecondition);
  CHECK(result.status().message().find("session expired") != std::string::npos);
  CHECK(QueueLength(*client, holder.prefix()) == 0);
}

TEST_CASE("Mutex: Lock gives up on timeout, on cancel and when the session is lost",
          "[client][mutex][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  auto holder_session = NewSession(client.get());
  Mutex holder(client.get(), *holder_session, "/locks/busy");
  REQUIRE(holder.Lock().ok());

  SECTION("timeout") {
    auto session = NewSession(client.get());
    Mutex waiter(client.get(), *session, "/locks/busy");
    LockOptions options;
    options.timeout = milliseconds(300);
    auto result = waiter.Lock(options);
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == StatusCode::kTimeout);
  }
  SECTION("caller cancels") {
    auto session = NewSession(client.get());
    Mutex waiter(client.get(), *session, "/locks/busy");
    std::stop_source stop;
    LockOptions options;
    options.stop = stop.get_token();
    auto waiting = std::async(std::launch::async, [&] { return waiter.Lock(options); });
    REQUIRE(Eventually([&] { return QueueLength(*client, "/locks/busy/") == 2; }, seconds(10),
                       kProcessPoll));
    stop.request_stop();
    auto result = waiting.get();
    REQUIRE_FALSE(result.ok());
    CHECK(result.status().code() == StatusCode::kAborted);
  }
  SECTION("session lost while queued") {
    auto session = NewSession(client.get());
    Mutex waiter(client.get(), *session, "/locks/busy");
    auto waiting = std::async(std::launch::async, [&] { return waiter.Lock(); });
    REQUIRE(Eventually([&] { return QueueLength(*client, "/locks/busy/") == 2; }, seconds(10),
                       kProcessPoll));
    etcdserverpb::LeaseRevokeRequest revoke;
    revoke.set_id(session->lease().value());
    REQUIRE(client->LeaseRevoke(revoke).ok());
    auto result = waiting.get();
    REQUIRE_FALSE(result.ok());
    CHECK(session->state() == SessionState::kLost);
  }
  // Whatever happened, the waiter left the queue: only the holder's key remains.
  CHECK(QueueLength(*client, "/locks/busy/") == 1);
  REQUIRE(holder.Unlock().ok());
}

}  // namespace
}  // namespace epoch::client
