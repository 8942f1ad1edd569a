// LeaseManager (server/lease/include/epoch/lease/lease_manager.h) on a real one-node stack:
// RaftDriver with an in-memory log, KvStateMachine over a RocksDB KvStore in a temporary directory,
// NodeContext. The driver and the manager read one test clock = the monotonic clock + an offset
// that the test moves forward, so TTLs, expiry and clock ticks are driven explicitly (jumps of
// seconds) instead of waited for; every wait is a condition polled until a deadline.
#include "epoch/lease/lease_manager.h"

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <set>
#include <thread>

#include "epoch/etcd_errors.h"
#include "epoch/raft/memory_log.h"
#include "epoch/replication/durable_log.h"
#include "epoch/replication/kv_state_machine.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::server {

using epoch::test_support::Eventually;
namespace {

using namespace std::chrono_literals;
namespace pb = etcdserverpb;

class NullSender final : public MessageSender {
 public:
  void Send(const raft::Message&) override {}
  void OnMembership(const raft::ConfState&) override {}
};

// One node: driver + store + context + lease manager, restartable over the same log and store.
class LeaseNode {
 public:
  explicit LeaseNode(LeaseOptions options = {}) : options_(std::move(options)) {
    config_.name = "n1";
    config_.data_dir = dir_.path();
    config_.raft.id = NodeId(1);
    config_.tick = 10ms;
    config_.members.push_back(MemberInfo{NodeId(1), "n1", {"127.0.0.1", 1}, {"127.0.0.1", 2}});
    Result<std::unique_ptr<KvStore>> store = KvStore::Open(dir_.path() + "/kv", KvStoreOptions{});
    REQUIRE(store.ok());
    store_ = std::move(*store);
    state_machine_ = std::make_unique<KvStateMachine>(*store_);
    options_.clock = [this] { return Now(); };
    io_thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io_);
      io_.run();
    });
    Start();
  }

  ~LeaseNode() {
    StopNode();
    io_.stop();
    io_thread_.join();
    pool_.join();
  }

  std::chrono::steady_clock::time_point Now() const {
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(offset_ms_.load());
  }
  void Jump(std::chrono::milliseconds d) { offset_ms_ += d.count(); }

  void Start() {
    RaftDriverOptions dopts;
    dopts.raft = config_.raft;
    dopts.tick = config_.tick;
    dopts.seed = 1;
    dopts.clock = [this] { return Now(); };
    driver_ = std::make_unique<RaftDriver>(io_, dopts, log_, *state_machine_, sender_);
    context_ = std::make_unique<NodeContext>(config_, *driver_, *store_, pool_, nullptr);
    leases_ = std::make_unique<LeaseManager>(*context_, options_);
    driver_->Start(leases_->Hooks());
    REQUIRE(Eventually([this] { return leases_->Stats().clock_running; }));
  }

  // Stops the driver and the manager and waits until nothing of theirs runs on the strand.
  void StopNode() {
    if (!driver_) return;
    leases_->Stop();
    driver_->Stop();
    for (int i = 0; i < 2; ++i) Barrier();
    leases_.reset();
    context_.reset();
    driver_.reset();
  }

  void Restart() {
    StopNode();
    Start();
  }

  // Returns once everything posted to the driver's strand before it has run.
  void Barrier() {
    std::promise<void> done;
    driver_->Post([&done] { done.set_value(); });
    REQUIRE(done.get_future().wait_for(10s) == std::future_status::ready);
  }

  std::pair<Status, v1::InternalResponse> Propose(v1::InternalRequest request) {
    std::promise<std::pair<Status, v1::InternalResponse>> done;
    auto future = done.get_future();
    driver_->Propose(std::move(request), [&done](const Status& s, const v1::InternalResponse& r) {
      done.set_value({s, r});
    });
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    return future.get();
  }

  // Grants through the log; id 0 lets the leader choose. REQUIREs success.
  v1::LeaseGrantResult Grant(std::int64_t ttl_ms, std::int64_t id = 0) {
    auto [status, response] = GrantStatus(ttl_ms, id);
    INFO(status.ToString());
    REQUIRE(status.ok());
    return response.lease_grant();
  }
  std::pair<Status, v1::InternalResponse> GrantStatus(std::int64_t ttl_ms, std::int64_t id) {
    v1::InternalRequest req;
    req.mutable_lease_grant()->set_id(id);
    req.mutable_lease_grant()->set_ttl_ms(ttl_ms);
    return Propose(std::move(req));
  }

  Revision Put(const std::string& key, std::int64_t lease) {
    v1::InternalRequest req;
    req.mutable_put()->set_key(key);
    req.mutable_put()->set_value("v");
    req.mutable_put()->set_lease(lease);
    auto [status, response] = Propose(std::move(req));
    REQUIRE(status.ok());
    return Revision(response.put().header().revision());
  }

  // Starts a keep-alive; the future holds its outcome.
  std::future<KeepAliveOutcome> StartKeepAlive(std::int64_t id) {
    auto done = std::make_shared<std::promise<KeepAliveOutcome>>();
    auto future = done->get_future();
    leases_->KeepAlive(LeaseId(id), false,
                       [done](const KeepAliveOutcome& out) { done->set_value(out); });
    return future;
  }
  KeepAliveOutcome KeepAlive(std::int64_t id) {
    auto future = StartKeepAlive(id);
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    return future.get();
  }

  std::optional<LeaseInfo> Lease(std::int64_t id) {
    Result<std::optional<LeaseInfo>> info = store_->GetLease(LeaseId(id));
    REQUIRE(info.ok());
    return *info;
  }
  bool HasKey(const std::string& key) {
    pb::RangeRequest r;
    r.set_key(key);
    Result<pb::RangeResponse> resp = store_->Range(r);
    REQUIRE(resp.ok());
    return resp->kvs_size() > 0;
  }

  KvStore& store() { return *store_; }
  LeaseManager& leases() { return *leases_; }

 private:
  test_support::TempDir dir_{"epoch-lease"};
  NodeConfig config_;
  LeaseOptions options_;
  std::atomic<std::int64_t> offset_ms_{0};
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<KvStateMachine> state_machine_;
  MemoryDurableLog log_{raft::MemoryLog::Bootstrapped({NodeId(1)})};
  NullSender sender_;
  asio::io_context io_;
  asio::thread_pool pool_{1};
  std::thread io_thread_;
  std::unique_ptr<RaftDriver> driver_;
  std::unique_ptr<NodeContext> context_;
  std::unique_ptr<LeaseManager> leases_;
};

TEST_CASE("lease manager: the leader stamps entries with its clock, which moves with its time",
          "[server][lease][manager]") {
  LeaseNode node;
  const std::int64_t before = node.store().ClusterTimeMs();
  node.Jump(5s);
  v1::LeaseGrantResult g = node.Grant(3000);
  // The grant was stamped at least 5 s after `before`: its deadline counts from there.
  CHECK(g.deadline_cluster_ms() - g.ttl_ms() >= before + 5000);
  CHECK(node.store().ClusterTimeMs() >= before + 5000);
}

TEST_CASE("lease manager: server-chosen IDs are non-zero and unique; a requested ID is honoured",
          "[server][lease][manager]") {
  LeaseNode node;
  std::set<std::int64_t> ids;
  for (int i = 0; i < 20; ++i) {
    std::int64_t id = node.Grant(60'000).id();
    CHECK(id > 0);
    ids.insert(id);
  }
  CHECK(ids.size() == 20);
  CHECK(node.Grant(60'000, 42).id() == 42);
  auto [status, response] = node.GrantStatus(60'000, 42);
  CHECK(status.message() == epoch::etcd_errors::kLeaseExist.message);
}

TEST_CASE("lease manager: a keep-alive renews from the cluster clock; unknown leases get TTL 0",
          "[server][lease][manager]") {
  LeaseNode node;
  v1::LeaseGrantResult g = node.Grant(2000);
  node.Jump(1500ms);
  const Revision revision = node.store().CurrentRevision();
  KeepAliveOutcome out = node.KeepAlive(g.id());
  REQUIRE(out.status.ok());
  CHECK(out.id == LeaseId(g.id()));
  CHECK(out.ttl_ms == 2000);
  CHECK(out.deadline_cluster_ms >= g.deadline_cluster_ms() + 1500);
  CHECK(node.Lease(g.id())->deadline_cluster_ms == out.deadline_cluster_ms);
  // The header was captured before the renewal, at the revision of that moment.
  CHECK(out.header.revision() == revision.value());

  KeepAliveOutcome unknown = node.KeepAlive(987654321);
  REQUIRE(unknown.status.ok());
  CHECK(unknown.ttl_ms == 0);
}

TEST_CASE("lease manager: keep-alives of one window share one renewal entry",
          "[server][lease][manager]") {
  LeaseOptions options;
  options.keepalive_window = 10s;  // on the test clock: only our jump closes the window
  LeaseNode node(options);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(node.Grant(60'000).id());
  const std::uint64_t entries_before = node.leases().Stats().renewal_entries;
  std::vector<std::future<KeepAliveOutcome>> pending;
  for (int round = 0; round < 10; ++round) {
    for (std::int64_t id : ids) pending.push_back(node.StartKeepAlive(id));
  }
  node.Barrier();  // all 50 are in the batcher now
  for (auto& f : pending) CHECK(f.wait_for(0s) == std::future_status::timeout);
  node.Jump(10s);
  for (auto& f : pending) {
    REQUIRE(f.wait_for(10s) == std::future_status::ready);
    KeepAliveOutcome out = f.get();
    CHECK(out.status.ok());
    CHECK(out.ttl_ms == 60'000);
  }
  CHECK(node.leases().Stats().renewal_entries == entries_before + 1);
}

TEST_CASE("lease manager: an expired lease is revoked and its keys deleted in one revision",
          "[server][lease][manager]") {
  LeaseNode node;
  v1::LeaseGrantResult g = node.Grant(1000);
  node.Put("a", g.id());
  node.Put("b", g.id());
  const Revision revision = node.Put("c", 0);
  node.Jump(1500ms);
  REQUIRE(Eventually([&] { return !node.Lease(g.id()).has_value(); }));
  CHECK_FALSE(node.HasKey("a"));
  CHECK_FALSE(node.HasKey("b"));
  CHECK(node.HasKey("c"));
  CHECK(node.store().CurrentRevision() == revision + 1);
  Result<EventBatch> events = node.store().ReadEvents(revision + 1, 100, false);
  REQUIRE(events.ok());
  REQUIRE(events->events.size() == 2);
  for (const mvccpb::Event& e : events->events) CHECK(e.type() == mvccpb::Event::DELETE);
  CHECK(node.leases().Stats().expired == 1);
}

TEST_CASE(
    "lease manager: a lease kept alive outlives its TTL; one past its deadline is not "
    "renewed",
    "[server][lease][manager]") {
  LeaseNode node;
  v1::LeaseGrantResult g = node.Grant(1000);
  node.Put("held", g.id());
  for (int i = 0; i < 5; ++i) {
    node.Jump(600ms);
    KeepAliveOutcome out = node.KeepAlive(g.id());
    REQUIRE(out.status.ok());
    CHECK(out.ttl_ms == 1000);
  }
  CHECK(node.Lease(g.id()).has_value());  // 3 s after the grant, TTL 1 s
  CHECK(node.HasKey("held"));
  node.Jump(1500ms);
  // Whether the expiry check ran first (lease gone) or not (deadline passed): TTL 0, not renewed.
  KeepAliveOutcome late = node.KeepAlive(g.id());
  REQUIRE(late.status.ok());
  CHECK(late.ttl_ms == 0);
  REQUIRE(Eventually([&] { return !node.Lease(g.id()).has_value(); }));
  CHECK_FALSE(node.HasKey("held"));
}

TEST_CASE("lease manager: the lease table is read only when a deadline may have passed",
          "[server][lease][manager]") {
  LeaseOptions options;
  LeaseNode node(options);
  v1::LeaseGrantResult long_lease = node.Grant(60'000);
  // Let a check read the table (it learns the earliest deadline: 60 s away).
  node.Jump(50ms);
  REQUIRE(Eventually([&] { return node.leases().Stats().expiry_scans >= 1; }));
  node.Barrier();
  const std::uint64_t scans = node.leases().Stats().expiry_scans;
  const std::uint64_t ticks = node.leases().Stats().clock_ticks;
  node.Jump(1s);
  // A ClockTick after the jump means expiry checks ran after it too (same tick handler).
  REQUIRE(Eventually([&] { return node.leases().Stats().clock_ticks > ticks; }));
  CHECK(node.leases().Stats().expiry_scans == scans);

  // A shorter lease granted since lowers the earliest possible expiry: it still expires on time.
  v1::LeaseGrantResult short_lease = node.Grant(500);
  node.Put("short", short_lease.id());
  node.Jump(700ms);
  REQUIRE(Eventually([&] { return !node.Lease(short_lease.id()).has_value(); }));
  CHECK_FALSE(node.HasKey("short"));
  CHECK(node.Lease(long_lease.id()).has_value());
  CHECK(node.leases().Stats().expiry_scans > scans);
}

TEST_CASE("lease manager: expiry checks read only the leases whose deadline passed",
          "[server][lease][manager]") {
  LeaseNode node;
  for (int i = 0; i < 300; ++i) node.Grant(60'000);
  std::vector<std::int64_t> short_leases;
  for (int i = 0; i < 3; ++i) short_leases.push_back(node.Grant(500).id());
  node.Jump(700ms);
  REQUIRE(Eventually([&] {
    for (std::int64_t id : short_leases) {
      if (node.Lease(id).has_value()) return false;
    }
    return true;
  }));
  const LeaseStats stats = node.leases().Stats();
  INFO("visits " << stats.expiry_visits << ", full reads " << stats.expiry_full_reads);
  CHECK(stats.expiry_full_reads == 1);  // when the clock started, before the grants
  // Each short lease is read while expired (until its revoke applies) and once more when gone;
  // none of the 300 long ones is read.
  CHECK(stats.expiry_visits >= 3);
  CHECK(stats.expiry_visits < 300);
}

// A mass expiry is spread over checks (etcd's revoke rate): each revoke is an entry every member
// applies, and 30k of them at once starved the followers into elections.
TEST_CASE("lease manager: a mass expiry revokes at most revokes_per_check leases per check",
          "[server][lease][manager]") {
  LeaseNode node;
  const std::size_t cap = LeaseOptions{}.revokes_per_check;
  // The default rate is etcd's leaseRevokeRate: 1,000 revokes a second.
  CHECK(cap * static_cast<std::size_t>(1000ms / LeaseOptions{}.expiry_check_interval) <= 1000);
  const int count = static_cast<int>(3 * cap);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < count; ++i) ids.push_back(node.Grant(500).id());
  const LeaseStats before = node.leases().Stats();
  node.Jump(700ms);
  bool capped = true;
  REQUIRE(Eventually([&] {
    const LeaseStats s = node.leases().Stats();
    // Counted after each revoke applied; the checks before each proposal.
    capped = capped && s.expired - before.expired <= cap * (s.expiry_scans - before.expiry_scans);
    return s.expired - before.expired == static_cast<std::uint64_t>(count);
  }));
  CHECK(capped);
  for (std::int64_t id : ids) CHECK(!node.Lease(id).has_value());
}

TEST_CASE("lease manager: an idle leader's clock ticks reach the log", "[server][lease][manager]") {
  LeaseNode node;
  const std::int64_t before = node.store().ClusterTimeMs();
  const std::uint64_t ticks = node.leases().Stats().clock_ticks;
  node.Jump(2s);
  REQUIRE(Eventually([&] { return node.store().ClusterTimeMs() >= before + 2000; }));
  // Counted by the proposal's callback, which may run after the apply that moved the clock.
  CHECK(Eventually([&] { return node.leases().Stats().clock_ticks > ticks; }));
}

TEST_CASE(
    "lease manager: after a restart the clock continues from the applied time and TTLs "
    "are not reset",
    "[server][lease][manager]") {
  LeaseNode node;
  v1::LeaseGrantResult g = node.Grant(10'000);
  node.Jump(3s);
  REQUIRE(Eventually(
      [&] { return node.store().ClusterTimeMs() >= g.deadline_cluster_ms() - g.ttl_ms() + 3000; }));
  node.StopNode();
  node.Jump(60s);  // a minute without a leader: the cluster clock stands still
  node.Start();
  REQUIRE(node.Lease(g.id()).has_value());
  const std::int64_t remaining = g.deadline_cluster_ms() - node.leases().EstimateNowMs();
  // Survived the minute (not expired), and not renewed to the full 10 s either: 3 s were used.
  CHECK(remaining > 0);
  CHECK(remaining <= 7000);
  KeepAliveOutcome out = node.KeepAlive(g.id());
  REQUIRE(out.status.ok());
  CHECK(out.ttl_ms == 10'000);
}

}  // namespace
}  // namespace epoch::server
