// RaftDriver with three nodes on one io_context, an in-process network that goes through the
// peer codec, in-memory durable logs and a toy state machine. Real time, short ticks; every wait
// is on a condition with a deadline.
#include "epoch/replication/raft_driver.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "epoch/etcd_errors.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/raft/conf_change.h"
#include "epoch/test_support/eventually.h"

namespace epoch::server {

using epoch::test_support::Eventually;
namespace {

using namespace std::chrono_literals;

// Applies puts to a map; the response's header revision is the entry's log index.
class ToyStateMachine final : public StateMachine {
 public:
  LogIndex AppliedIndex() const override { return applied_.load(); }
  std::vector<ApplyOutcome> Apply(std::span<const raft::Entry> entries) override {
    std::vector<ApplyOutcome> out;
    for (const raft::Entry& e : entries) {
      ApplyOutcome o;
      o.index = e.index;
      if (e.type == raft::EntryType::kNormal && !e.data.empty()) {
        v1::InternalRequest req;
        if (!req.ParseFromString(e.data)) ++bad_entries;  // checked by ~Cluster (test thread)
        o.request_id = req.request_id();
        // A put of "slow/..." takes apply_cost_ms on the member's clock (a forced slow apply).
        if (req.put().key().starts_with("slow/")) apply_clock_ms += apply_cost_ms.load();
        std::lock_guard lock(mu_);
        data_[req.put().key()] = req.put().value();
        o.response.mutable_put()->mutable_header()->set_revision(
            static_cast<std::int64_t>(e.index.value()));
      }
      out.push_back(std::move(o));
      applied_ = e.index;
    }
    return out;
  }
  std::optional<std::string> Get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = data_.find(key);
    if (it == data_.end()) return std::nullopt;
    return it->second;
  }
  std::atomic<int> bad_entries{0};
  std::atomic<std::int64_t> apply_cost_ms{0};
  std::atomic<std::int64_t> apply_clock_ms{0};  // added to the member's clock

 private:
  std::atomic<LogIndex> applied_{LogIndex(1)};  // the bootstrap snapshot covers index 1
  std::mutex mu_;
  std::map<std::string, std::string> data_;
};

class FailingLog final : public DurableLog {
 public:
  explicit FailingLog(raft::MemoryLog log) : inner_(std::move(log)) {}
  raft::HardState InitialHardState() const override { return inner_.InitialHardState(); }
  raft::SnapshotMeta LastSnapshot() const override { return inner_.LastSnapshot(); }
  LogIndex FirstIndex() const override { return inner_.FirstIndex(); }
  LogIndex LastIndex() const override { return inner_.LastIndex(); }
  std::optional<Term> TermAt(LogIndex i) const override { return inner_.TermAt(i); }
  std::vector<raft::Entry> Entries(LogIndex lo, LogIndex hi, std::uint64_t max) const override {
    return inner_.Entries(lo, hi, max);
  }
  void Persist(const std::optional<raft::SnapshotMeta>& s, const std::vector<raft::Entry>& e,
               const std::optional<raft::HardState>& h, bool sync, DoneCallback done) override {
    if (fail.load() && !e.empty()) return done(Status::IOError("fdatasync: Input/output error"));
    if (hold.load() && !e.empty()) {
      // A slow disk: the write completes when the test releases it.
      held_.push_back([this, s, e, h, sync, done = std::move(done)]() mutable {
        inner_.Persist(s, e, h, sync, std::move(done));
      });
      held_count.store(held_.size());
      return;
    }
    inner_.Persist(s, e, h, sync, std::move(done));
  }
  Status Compact(LogIndex i, const raft::ConfState& c) override { return inner_.Compact(i, c); }
  // Completes the oldest held write. Call on the driver's strand, as Persist is.
  void ReleaseOne() {
    if (held_.empty()) return;
    auto write = std::move(held_.front());
    held_.pop_front();
    held_count.store(held_.size());
    write();
  }
  std::atomic<bool> fail{false};
  std::atomic<bool> hold{false};
  std::atomic<std::size_t> held_count{0};

 private:
  MemoryDurableLog inner_;
  std::deque<std::function<void()>> held_;  // on the driver's strand
};

class Cluster;

// Delivers through the codec, as the TCP transport would; drops messages to "down" nodes.
class LoopSender final : public MessageSender {
 public:
  LoopSender(Cluster& cluster) : cluster_(cluster) {}
  void Send(const raft::Message& m) override;
  void OnMembership(const raft::ConfState&) override {}

 private:
  Cluster& cluster_;
};

class Cluster {
 public:
  // `tick`: short by default to keep tests fast; the lease test uses a longer one so that a
  // loaded machine (late timers) still leaves the lease valid between heartbeat rounds.
  explicit Cluster(int n, std::chrono::milliseconds tick = 2ms) {
    std::vector<NodeId> ids;
    for (int i = 1; i <= n; ++i) ids.emplace_back(i);
    for (int i = 1; i <= n; ++i) {
      auto node = std::make_unique<Member>(*this);
      node->log = std::make_unique<FailingLog>(raft::MemoryLog::Bootstrapped(ids));
      RaftDriverOptions opts;
      opts.raft.id = NodeId(i);
      opts.tick = tick;
      opts.seed = static_cast<std::uint64_t>(i);
      opts.clock = [m = node.get()] {
        return std::chrono::steady_clock::now() +
               std::chrono::milliseconds(m->clock_offset_ms.load() + m->sm.apply_clock_ms.load());
      };
      opts.on_fatal = [m = node.get()](const Status& s) {
        std::lock_guard lock(m->mu);
        m->fatal = s;
      };
      node->driver = std::make_unique<RaftDriver>(io_, opts, *node->log, node->sm, node->sender);
      members_.push_back(std::move(node));
    }
    for (auto& m : members_) m->driver->Start();
    thread_ = std::thread([this] {
      auto guard = asio::make_work_guard(io_);
      io_.run();
    });
  }
  ~Cluster() {
    for (auto& m : members_) m->driver->Stop();
    io_.stop();
    thread_.join();
    for (auto& m : members_) CHECK(m->sm.bad_entries.load() == 0);
    std::lock_guard lock(codec_mu_);
    for (const std::string& e : codec_errors_) UNSCOPED_INFO(e);
    CHECK(codec_errors_.empty());
  }

  struct Member {
    explicit Member(Cluster& c) : sender(c) {}
    std::unique_ptr<FailingLog> log;
    ToyStateMachine sm;
    LoopSender sender;
    std::unique_ptr<RaftDriver> driver;
    std::mutex mu;
    std::optional<Status> fatal;
    std::atomic<std::int64_t> clock_offset_ms{0};  // a jump simulates a pause of the process
  };

  Member& member(NodeId id) { return *members_[id.value() - 1]; }

  // The leader every member agrees on, once there is one.
  NodeId WaitForLeader(std::chrono::milliseconds deadline = 10s) {
    auto end = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < end) {
      NodeId leader = members_[0]->driver->status().leader;
      bool agreed = leader != raft::kNoNode;
      for (auto& m : members_) agreed = agreed && m->driver->status().leader == leader;
      if (agreed && member(leader).driver->status().role == raft::Role::kLeader) return leader;
      std::this_thread::sleep_for(1ms);  // polling real time, not a fixed wait
    }
    return raft::kNoNode;
  }

  std::pair<Status, v1::InternalResponse> Put(NodeId via, const std::string& key,
                                              const std::string& value) {
    v1::InternalRequest req;
    req.mutable_put()->set_key(key);
    req.mutable_put()->set_value(value);
    std::promise<std::pair<Status, v1::InternalResponse>> done;
    auto future = done.get_future();
    member(via).driver->Propose(req, [&done](const Status& s, const v1::InternalResponse& r) {
      done.set_value({s, r});
    });
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    return future.get();
  }

  std::future<std::pair<Status, v1::InternalResponse>> ProposePut(NodeId via,
                                                                  const std::string& key,
                                                                  const std::string& value) {
    v1::InternalRequest req;
    req.mutable_put()->set_key(key);
    req.mutable_put()->set_value(value);
    auto done = std::make_shared<std::promise<std::pair<Status, v1::InternalResponse>>>();
    auto future = done->get_future();
    member(via).driver->Propose(req, [done](const Status& s, const v1::InternalResponse& r) {
      done->set_value({s, r});
    });
    return future;
  }

  Status Read(NodeId via) {
    std::promise<Status> done;
    auto future = done.get_future();
    member(via).driver->ReadIndex([&done](const Status& s) { done.set_value(s); });
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    return future.get();
  }

  std::atomic<bool> partitioned[8] = {};

 private:
  friend class LoopSender;
  std::mutex codec_mu_;
  std::vector<std::string> codec_errors_;  // guarded by codec_mu_
  asio::io_context io_;
  std::vector<std::unique_ptr<Member>> members_;
  std::thread thread_;
};

void LoopSender::Send(const raft::Message& m) {
  // Runs on the drivers' thread: Catch assertions are not thread-safe, so a codec mismatch is
  // recorded here and checked on the test's thread when the cluster is destroyed.
  if (cluster_.partitioned[m.from.value()] || cluster_.partitioned[m.to.value()]) return;
  Result<raft::Message> decoded = DecodeFrame(EncodeFrame(m));
  if (!decoded.ok() || !(*decoded == m)) {
    std::lock_guard lock(cluster_.codec_mu_);
    cluster_.codec_errors_.push_back(
        raft::DescribeMessage(m) + " re-decoded as " +
        (decoded.ok() ? raft::DescribeMessage(*decoded) : decoded.status().ToString()));
    return;
  }
  cluster_.member(m.to).driver->Receive(std::move(*decoded));
}

TEST_CASE("driver: a leader is elected and proposals commit with their response",
          "[server][driver]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  auto [status, response] = c.Put(leader, "k", "v1");
  REQUIRE(status.ok());
  CHECK(response.put().header().revision() > 1);
  // Linearizable read on a follower: once served, the follower has applied the write. With real
  // 10 ms ticks a slow machine (TSan) may see an election in between, which fails that read
  // with a retryable error: try again, a bounded number of times.
  NodeId follower(leader.value() % 3 + 1);
  Status read = c.Read(follower);
  for (int attempt = 0; attempt < 20 && !read.ok(); ++attempt) read = c.Read(follower);
  INFO(read.ToString());
  REQUIRE(read.ok());
  CHECK(c.member(follower).sm.Get("k") == "v1");
}

// etcd_server_slow_apply_total: an apply that takes longer than kSlowApply on the driver's clock
// is counted. The toy state machine moves the member's clock while it applies a "slow/" key.
TEST_CASE("driver: an apply slower than kSlowApply is counted", "[server][driver][metrics]") {
  Cluster c(1);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  REQUIRE(c.Put(leader, "warm", "v").first.ok());
  const std::uint64_t before = c.member(leader).driver->status().slow_applies;
  c.member(leader).sm.apply_cost_ms = (RaftDriver::kSlowApply + 50ms).count();
  REQUIRE(c.Put(leader, "slow/1", "v").first.ok());
  // status() is published at the top of every Ready; reads make more of them.
  bool counted = false;
  for (int attempt = 0; attempt < 100 && !counted; ++attempt) {
    REQUIRE(c.Read(leader).ok());
    counted = c.member(leader).driver->status().slow_applies >= before + 1;
  }
  CHECK(counted);
}

// The value of one sample line `name` of the driver's /metrics text (0 if absent).
double MetricValue(const RaftDriver& driver, const std::string& name) {
  std::string text;
  MetricsText m(&text);
  driver.RenderMetrics(m);
  const std::string prefix = name + " ";
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, prefix.size(), prefix) == 0) {
      return std::stod(text.substr(pos + prefix.size(), end - pos - prefix.size()));
    }
    pos = end + 1;
  }
  return 0;
}

// epoch_raft_tick_delay_seconds: a tick that runs late (here: the member's clock jumps 300 ms,
// as when its strand was blocked that long) is counted above the 128 ms bucket.
TEST_CASE("driver: a tick that runs late shows in the tick delay histogram",
          "[server][driver][metrics]") {
  Cluster c(1);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  const RaftDriver& driver = *c.member(leader).driver;
  auto late_ticks = [&driver] {
    return MetricValue(driver, "epoch_raft_tick_delay_seconds_count") -
           MetricValue(driver, "epoch_raft_tick_delay_seconds_bucket{le=\"0.128\"}");
  };
  const double before = late_ticks();
  c.member(leader).clock_offset_ms += 300;
  CHECK(Eventually([&] { return late_ticks() >= before + 1; }));
  CHECK(MetricValue(driver, "epoch_raft_apply_seconds_count") >= 1);  // the leader's empty entry
}

// Reads queued on the strand before their request is made share one ReadIndex round, and each
// of them still sees every write acknowledged before it was issued.
TEST_CASE("driver: follower reads that queue together share one ReadIndex round",
          "[server][driver][read]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  NodeId follower(leader.value() % 3 + 1);
  constexpr int kReads = 50;
  bool shared = false;
  // An election in between (slow machine) fails a whole batch with a retryable error: retry.
  for (int attempt = 0; attempt < 20 && !shared; ++attempt) {
    auto [put, response] = c.Put(leader, "k", "v" + std::to_string(attempt));
    if (!put.ok()) {
      leader = c.WaitForLeader();
      follower = NodeId(leader.value() % 3 + 1);
      continue;
    }
    const LogIndex written = c.member(leader).driver->status().commit;
    const DriverStatus before = c.member(follower).driver->status();
    std::vector<std::promise<std::pair<Status, LogIndex>>> done(kReads);
    std::vector<std::future<std::pair<Status, LogIndex>>> results;
    for (auto& d : done) results.push_back(d.get_future());
    RaftDriver& reader = *c.member(follower).driver;
    // Issued from the strand itself, so all of them are queued before their request is made.
    std::promise<void> issued;
    reader.Post([&] {
      for (auto& d : done) {
        reader.ReadIndex([&d, &reader_sm = c.member(follower).sm](const Status& s) {
          d.set_value({s, reader_sm.AppliedIndex()});
        });
      }
      issued.set_value();
    });
    REQUIRE(issued.get_future().wait_for(10s) == std::future_status::ready);
    int ok = 0;
    for (auto& f : results) {
      REQUIRE(f.wait_for(10s) == std::future_status::ready);
      auto [status, applied] = f.get();
      if (!status.ok()) continue;
      ++ok;
      CHECK(applied >= written);  // served only once the write before it is applied here
    }
    if (ok != kReads) continue;
    const DriverStatus after = c.member(follower).driver->status();
    CHECK(after.read_index_reads - before.read_index_reads == kReads);
    CHECK(after.read_index_requests - before.read_index_requests == 1);
    shared = true;
  }
  CHECK(shared);
}

TEST_CASE("driver: a follower refuses proposals with not-leader", "[server][driver]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  NodeId follower(leader.value() % 3 + 1);
  auto [status, response] = c.Put(follower, "k", "v");
  CHECK(status.Is(StatusCode::kNotLeader));
  CHECK(status.message() == epoch::etcd_errors::kNotLeader.message);
}

TEST_CASE("driver: many concurrent proposals all commit in one order", "[server][driver]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  constexpr int kProposals = 500;
  std::mutex mu;
  std::condition_variable cv;
  int done = 0, ok = 0;
  std::set<std::int64_t> revisions;
  for (int i = 0; i < kProposals; ++i) {
    v1::InternalRequest req;
    req.mutable_put()->set_key("k" + std::to_string(i));
    req.mutable_put()->set_value("v");
    c.member(leader).driver->Propose(req, [&](const Status& s, const v1::InternalResponse& r) {
      std::lock_guard lock(mu);
      ++done;
      if (s.ok()) {
        ++ok;
        revisions.insert(r.put().header().revision());
      }
      cv.notify_all();
    });
  }
  std::unique_lock lock(mu);
  REQUIRE(cv.wait_for(lock, 20s, [&] { return done == kProposals; }));
  CHECK(ok == kProposals);
  CHECK(revisions.size() == kProposals);  // each at its own log index
}

TEST_CASE("driver: leadership transfer moves the leader", "[server][driver]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  REQUIRE(c.Put(leader, "k", "v").first.ok());
  NodeId target(leader.value() % 3 + 1);
  std::promise<Status> done;
  c.member(leader).driver->TransferLeadership(target, [&](const Status& s) { done.set_value(s); });
  REQUIRE(done.get_future().get().ok());
  auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end && c.WaitForLeader() != target) {
  }
  CHECK(c.WaitForLeader() == target);
  CHECK(c.Put(target, "k", "v2").first.ok());
}

// Regression: a driver that skips the ticks it missed while its loop was paused would, after a
// pause (SIGSTOP, a stall) the leader still counted its lease as valid although it had expired in
// real time and another leader could have been elected.
TEST_CASE("driver: a leader whose process was paused does not serve reads from its lease",
          "[server][driver]") {
  Cluster c(3, 20ms);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  REQUIRE(c.Put(leader, "k", "v").first.ok());
  // Reads on a settled leader go through the lease.
  std::uint64_t lease_reads = 0;
  for (int i = 0; i < 200 && lease_reads == 0; ++i) {
    REQUIRE(c.Read(leader).ok());
    lease_reads = c.member(leader).driver->status().lease_reads;
  }
  REQUIRE(lease_reads > 0);
  // Everything runs on one io_context thread; hold it so no tick fires, then move the leader's
  // clock 10 s ahead: to the leader it is as if its process had been stopped for 10 s.
  std::promise<void> hold_started;
  std::promise<void> release;
  c.member(leader).driver->Post([&] {
    hold_started.set_value();
    release.get_future().wait();
  });
  hold_started.get_future().wait();
  c.member(leader).clock_offset_ms = 10000;
  release.set_value();
  Status read = c.Read(leader);
  // The read may succeed through ReadIndex or fail (the leader may have stepped down), but the
  // expired lease must not have served it.
  (void)read;
  c.member(leader).driver->Post([] {});
  CHECK(c.member(leader).driver->status().lease_reads == lease_reads);
}

// A leader that has written once and whose lease the fast path serves (polled: the lease starts
// with the first quorum round after the write).
NodeId SettledLeaseLeader(Cluster& c) {
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  REQUIRE(c.Put(leader, "k", "v").first.ok());
  bool served = false;
  for (int i = 0; i < 400 && !served; ++i) {
    served = c.member(leader).driver->TryLeaseRead();
    if (!served) std::this_thread::sleep_for(5ms);
  }
  REQUIRE(served);
  return leader;
}

// The lease fast path (TryLeaseRead, off the strand) decides as the strand would: it serves a
// settled leader, never a follower, and ends at once when the process was paused past the lease
// (no strand turn is needed to notice) or a leadership transfer starts.
TEST_CASE("driver: the lease fast path serves only a leader whose lease holds in real time",
          "[server][driver][read]") {
  Cluster c(3, 20ms);
  const NodeId leader = SettledLeaseLeader(c);
  RaftDriver& d = *c.member(leader).driver;
  CHECK(d.status().lease_reads > 0);
  NodeId follower(leader.value() % 3 + 1);
  CHECK_FALSE(c.member(follower).driver->TryLeaseRead());

  // Hold the strand (no tick, no publish), then move the leader's clock past any lease.
  auto hold_started = std::make_shared<std::promise<void>>();
  std::promise<void> release;
  d.Post([hold_started, released = release.get_future().share()] {
    hold_started->set_value();
    released.wait();
  });
  hold_started->get_future().wait();
  c.member(leader).clock_offset_ms = 10000;
  const bool after_pause = d.TryLeaseRead();
  release.set_value();
  CHECK_FALSE(after_pause);
}

TEST_CASE("driver: the lease fast path ends before a leadership transfer can send TimeoutNow",
          "[server][driver][read]") {
  Cluster c(3, 20ms);
  const NodeId leader = SettledLeaseLeader(c);
  RaftDriver& d = *c.member(leader).driver;
  // Hold the strand after the transfer call, so the lease is checked before anything else runs.
  auto started = std::make_shared<std::promise<Status>>();
  std::promise<void> release;
  NodeId target(leader.value() % 3 + 1);
  d.TransferLeadership(target, [started, released = release.get_future().share()](const Status& s) {
    started->set_value(s);
    released.wait();
  });
  Status s = started->get_future().get();
  const bool during_transfer = d.TryLeaseRead();
  release.set_value();
  REQUIRE(s.ok());
  CHECK_FALSE(during_transfer);
}

// A ReadIndex request whose message is lost must not strand its reads until a leader change; the
// answer to a later request serves them too (its index covers every read that came before it).
TEST_CASE("driver: a lost ReadIndex request neither stalls later reads nor strands its own",
          "[server][driver][read]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  NodeId follower(leader.value() % 3 + 1);
  REQUIRE(c.Put(leader, "k", "v").first.ok());
  auto first = std::make_shared<std::promise<Status>>();
  auto first_done = first->get_future();
  c.partitioned[follower.value()] = true;  // the request goes nowhere
  c.member(follower).driver->ReadIndex([first](const Status& s) { first->set_value(s); });
  std::this_thread::sleep_for(30ms);  // several ticks
  c.partitioned[follower.value()] = false;
  Status second = c.Read(follower);
  // An election may happen meanwhile on a slow machine (both reads then fail, retryably).
  REQUIRE(first_done.wait_for(10s) == std::future_status::ready);
  Status first_status = first_done.get();
  INFO(first_status.ToString() << " / " << second.ToString());
  CHECK(first_status.ok() == second.ok());
  if (c.member(follower).driver->status().leader_changes == 1) {
    CHECK(first_status.ok());
    CHECK(second.ok());
  }
}

TEST_CASE("driver: a committed entry is answered while the leader's next write is in flight",
          "[server][driver]") {
  // Ticks long enough that the followers do not campaign while the leader's writes are held
  // (a held write also holds its heartbeats).
  Cluster c(3, 25ms);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  Cluster::Member& m = c.member(leader);
  REQUIRE(Eventually([&] {
    DriverStatus s = m.driver->status();
    return s.applied == s.last_index && s.commit == s.last_index;
  }));
  const LogIndex before = m.driver->status().last_index;
  m.log->hold = true;
  auto a = c.ProposePut(leader, "a", "1");
  REQUIRE(Eventually([&] { return m.log->held_count.load() == 1; }));
  // The followers are a majority: "a" commits while the leader's own write of it is held.
  REQUIRE(Eventually([&] {
    DriverStatus s = m.driver->status();
    return s.last_index > before && s.commit >= s.last_index;
  }));
  const LogIndex a_index = m.driver->status().last_index;
  auto b = c.ProposePut(leader, "b", "2");
  REQUIRE(Eventually([&] { return m.driver->status().last_index > a_index; }));
  // The leader's write of "a" completes; the next Ready writes "b" and carries "a" as committed.
  m.driver->Post([&m] { m.log->ReleaseOne(); });
  REQUIRE(a.wait_for(5s) == std::future_status::ready);
  auto [status, response] = a.get();
  CHECK(status.ok());
  CHECK(response.put().header().revision() == static_cast<std::int64_t>(a_index.value()));
  // ... while the write of "b" is still held: "a" did not wait for it.
  CHECK(m.log->held_count.load() == 1);
  CHECK(b.wait_for(0s) != std::future_status::ready);
  CHECK(m.driver->status().leader == leader);
  m.log->hold = false;
  m.driver->Post([&m] { m.log->ReleaseOne(); });
  REQUIRE(b.wait_for(10s) == std::future_status::ready);
  CHECK(b.get().first.ok());
}

TEST_CASE("driver: a persist failure is fail-stop", "[server][driver]") {
  Cluster c(3);
  NodeId leader = c.WaitForLeader();
  REQUIRE(leader != raft::kNoNode);
  c.member(leader).log->fail = true;
  v1::InternalRequest req;
  req.mutable_put()->set_key("k");
  c.member(leader).driver->Propose(req, [](const Status&, const v1::InternalResponse&) {});
  auto end = std::chrono::steady_clock::now() + 10s;
  std::optional<Status> fatal;
  while (!fatal && std::chrono::steady_clock::now() < end) {
    std::lock_guard lock(c.member(leader).mu);
    fatal = c.member(leader).fatal;
  }
  REQUIRE(fatal.has_value());
  CHECK(fatal->Is(StatusCode::kIOError));
}

// Counts what a driver sends; safe from any thread.
class CountingSender final : public MessageSender {
 public:
  void Send(const raft::Message&) override { ++sent; }
  void OnMembership(const raft::ConfState&) override {}
  std::atomic<int> sent{0};
};

// The peer transport starts before the driver: a message that arrives first steps the core, but
// its Ready (the answer, a snapshot to install) waits for Start, which brings the hooks. Before,
// the Ready was handled at once, reading the hooks while Start assigned them from another thread
// (a data race under TSan) and, for a snapshot, without the snapshot hooks.
TEST_CASE("driver: no Ready is handled before Start", "[server][driver]") {
  asio::io_context io;
  std::thread thread([&io] {
    auto guard = asio::make_work_guard(io);
    io.run();
  });
  ToyStateMachine sm;
  CountingSender sender;
  MemoryDurableLog log(raft::MemoryLog::Bootstrapped({NodeId(1), NodeId(2), NodeId(3)}));
  RaftDriverOptions opts;
  opts.raft.id = NodeId(1);
  RaftDriver driver(io, opts, log, sm, sender);
  raft::Message heartbeat;
  heartbeat.type = raft::MessageType::kHeartbeat;
  heartbeat.from = NodeId(2);
  heartbeat.to = NodeId(1);
  heartbeat.term = Term(2);
  driver.Receive(heartbeat);
  std::promise<void> stepped;
  driver.Post([&stepped] { stepped.set_value(); });
  REQUIRE(stepped.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(sender.sent.load() == 0);  // the answer waits for Start

  int ticks = 0;
  std::promise<void> ticked;
  DriverHooks hooks;
  hooks.on_tick = [&] {
    if (++ticks == 1) ticked.set_value();
  };
  driver.Start(std::move(hooks));
  REQUIRE(ticked.get_future().wait_for(10s) == std::future_status::ready);
  CHECK(Eventually([&] { return sender.sent.load() > 0; }, 10s));  // answered after Start
  driver.Stop();
  std::promise<void> stopped;
  driver.Post([&stopped] { stopped.set_value(); });
  REQUIRE(stopped.get_future().wait_for(10s) == std::future_status::ready);
  io.stop();
  thread.join();
}

}  // namespace
}  // namespace epoch::server
