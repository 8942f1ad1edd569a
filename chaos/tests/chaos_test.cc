// Unit tests of the chaos harness's own parts: the proxy obeys its faults, the checkers flag what
// they must, the fault schedule covers every kind. The campaign itself runs as ctest chaos_short.
#include <sqlite3.h>

#include <asio.hpp>
#include <catch2/catch.hpp>
#include <set>

#include "epoch/chaos/chaos_cluster.h"
#include "epoch/chaos/faults.h"
#include "epoch/chaos/lock_workload.h"
#include "epoch/chaos/proxy_net.h"
#include "epoch/chaos/register_workload.h"
#include "epoch/chaos/watch_workload.h"
#include "epoch/client/admin.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/temp_dir.h"

namespace {

using asio::ip::tcp;
using epoch::chaos::LinkFault;

// A loopback listener standing in for node 1's peer port.
struct Sink {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0)};
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }
};

// Reads exactly n bytes, or fewer if the peer closes first.
std::string ReadN(tcp::socket& s, std::size_t n) {
  std::string out(n, '\0');
  asio::error_code ec;
  std::size_t got = asio::read(s, asio::buffer(out), ec);
  out.resize(got);
  return out;
}

}  // namespace

TEST_CASE("proxy forwards a pass link and closes a cut one", "[chaos]") {
  auto net = epoch::chaos::ProxyNet::Start(2, 1);
  REQUIRE(net.ok());
  Sink sink;
  (*net)->SetTarget(1, sink.port());
  tcp::socket dialer(sink.io);
  dialer.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), (*net)->listen_port(0, 1)));
  tcp::socket accepted = sink.acceptor.accept();
  asio::write(dialer, asio::buffer(std::string("hello")));
  CHECK(ReadN(accepted, 5) == "hello");
  asio::write(accepted, asio::buffer(std::string("back")));
  CHECK(ReadN(dialer, 4) == "back");

  (*net)->Set(0, 1, LinkFault::Cut());
  CHECK(ReadN(accepted, 1).empty());  // the proxy closed its side
  CHECK((*net)->connections_broken() >= 1);
  // A new dial is accepted and closed at once while the link is cut.
  tcp::socket again(sink.io);
  again.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), (*net)->listen_port(0, 1)));
  CHECK(ReadN(again, 1).empty());
}

TEST_CASE("proxy entry attributes a hello to its sender's link, and carries the rest unfaulted",
          "[chaos]") {
  auto net = epoch::chaos::ProxyNet::Start(3, 1);
  REQUIRE(net.ok());
  Sink sink;
  (*net)->SetTarget(2, sink.port());
  (*net)->SetMemberId(0, 0x0102030405060708ULL);
  auto entry = (*net)->AddEntry(2);
  REQUIRE(entry.ok());
  auto dial = [&] {
    tcp::socket s(sink.io);
    s.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), *entry));
    return s;
  };
  // docs/formats.md 5.1: length 24, magic, cluster ID, sender's member ID (big-endian).
  const std::string hello = std::string("\0\0\0\x18", 4) + "EPOCHP1\n" +
                            std::string("\0\0\0\0\0\0\0\x09", 8) +
                            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  tcp::socket from0 = dial();
  asio::write(from0, asio::buffer(hello + "frames"));
  tcp::socket at2 = sink.acceptor.accept();
  CHECK(ReadN(at2, hello.size() + 6) == hello + "frames");
  CHECK((*net)->accepted(0, 2) == 1);
  CHECK((*net)->unattributed() == 0);
  // It is link (0, 2) now: cutting that link closes it; link (1, 2) would not.
  (*net)->Set(1, 2, LinkFault::Cut());
  asio::write(from0, asio::buffer(std::string("more")));
  CHECK(ReadN(at2, 4) == "more");
  (*net)->Set(0, 2, LinkFault::Cut());
  CHECK(ReadN(at2, 1).empty());
  (*net)->HealAll();

  // A join request (or a hello of an unknown member) cannot be attributed: carried as it is.
  tcp::socket joiner = dial();
  const std::string join = std::string("\0\0\0\x10", 4) + "EPOCHJ1\nrequest!";
  asio::write(joiner, asio::buffer(join));
  tcp::socket at2_join = sink.acceptor.accept();
  CHECK(ReadN(at2_join, join.size()) == join);
  CHECK(epoch::test_support::Eventually([&] { return (*net)->unattributed() == 1; }));
}

TEST_CASE("proxy delays a delayed link and keeps byte order", "[chaos]") {
  auto net = epoch::chaos::ProxyNet::Start(2, 1);
  REQUIRE(net.ok());
  Sink sink;
  (*net)->SetTarget(1, sink.port());
  (*net)->Set(0, 1, LinkFault::Delay(std::chrono::milliseconds(200)));
  tcp::socket dialer(sink.io);
  dialer.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), (*net)->listen_port(0, 1)));
  tcp::socket accepted = sink.acceptor.accept();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) asio::write(dialer, asio::buffer(std::to_string(i)));
  CHECK(ReadN(accepted, 10) == "0123456789");
  // Semantics, not speed: nothing may arrive before the configured delay.
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(200));
}

TEST_CASE("watch check flags a gap, a duplicate and a reordering", "[chaos]") {
  using epoch::chaos::WatchEvent;
  std::vector<WatchEvent> h = {{2, "a", false, "1"}, {3, "b", false, "2"}, {4, "a", true, ""}};
  CHECK(epoch::chaos::CompareWatchEvents(h, h).empty());
  CHECK_FALSE(epoch::chaos::CompareWatchEvents({h[0], h[2]}, h).empty());              // gap
  CHECK_FALSE(epoch::chaos::CompareWatchEvents({h[0], h[1], h[1], h[2]}, h).empty());  // dup
  CHECK_FALSE(epoch::chaos::CompareWatchEvents({h[1], h[0], h[2]}, h).empty());        // reorder
  CHECK_FALSE(epoch::chaos::CompareWatchEvents({h[0], h[1]}, h).empty());  // stopped early
}

namespace {

// A fenced.db with the given commits (job, stage, token, worker), checked by LockWorkload.
std::string FencingVerdict(const std::vector<std::array<std::int64_t, 3>>& commits) {
  epoch::test_support::TempDir dir("epoch-chaos-test");
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.Sub("fenced.db").c_str(), &db) == SQLITE_OK);
  std::string sql =
      "CREATE TABLE commits (seq INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT, stage INTEGER,"
      " token INTEGER, worker INTEGER); CREATE TABLE worker_stats (worker INTEGER PRIMARY KEY,"
      " acquisitions INTEGER, stale INTEGER);";
  for (const auto& c : commits) {
    sql += "INSERT INTO commits (job, stage, token, worker) VALUES ('j', " + std::to_string(c[0]) +
           ", " + std::to_string(c[1]) + ", " + std::to_string(c[2]) + ");";
  }
  REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  epoch::chaos::LockWorkload w({"", "", dir.path(), 0, "j", 1});
  for (const auto& v : w.Check().violations) {
    if (v.checker == "fencing") return v.what;
  }
  return "";
}

}  // namespace

TEST_CASE("fencing check flags a repeated stage, an older token and a shared token", "[chaos]") {
  CHECK(FencingVerdict({{1, 5, 1}, {2, 5, 1}, {3, 9, 2}}).empty());
  CHECK_FALSE(FencingVerdict({{1, 5, 1}, {1, 9, 2}}).empty());  // stage 1 twice
  CHECK_FALSE(FencingVerdict({{1, 9, 2}, {2, 5, 1}}).empty());  // older token after newer
  CHECK_FALSE(FencingVerdict({{1, 5, 1}, {2, 5, 2}}).empty());  // token 5 held by two workers
  CHECK_FALSE(FencingVerdict({{1, 5, 1}, {3, 5, 1}}).empty());  // stage skipped
}

namespace {

using epoch::chaos::Acquisition;

constexpr std::int64_t kMs = 1'000'000;

// An acquisition by `worker` through `lease` with `token`: Lock() returned at `at` ms, Unlock
// was about to be sent at `end` ms, and the session's deadline was `deadline` ms. The read saw
// the token as the key's create_revision, and the header revision is the token's.
Acquisition Hold(int worker, std::int64_t lease, std::int64_t token, std::int64_t at,
                 std::int64_t end, std::int64_t deadline) {
  Acquisition a;
  a.worker = worker;
  a.lease = lease;
  a.token = token;
  a.key_create_revision = token;
  a.header_revision = token;
  a.returned_ns = at * kMs;
  a.end_ns = end * kMs;
  a.deadline_ns = deadline * kMs;
  a.ttl_ms = 1000;
  a.drift_rho = 0.05;
  return a;
}

// The workload's database with `history` recorded as the workers record it, checked by
// LockWorkload: the finding of checker `name`, "" if none.
std::string LockFinding(const std::vector<Acquisition>& history, const std::string& name) {
  epoch::test_support::TempDir dir("epoch-chaos-test");
  epoch::chaos::LockWorkload w({"", "", dir.path(), 0, "j", 1});
  REQUIRE(w.Start().ok());  // no workers: the tables only
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(dir.Sub("fenced.db").c_str(), &db) == SQLITE_OK);
  for (const Acquisition& a : history) REQUIRE(epoch::chaos::RecordAcquisition(db, a).ok());
  sqlite3_close(db);
  epoch::chaos::FencingReport report = w.Check();
  CHECK(report.recorded == history.size());
  for (const auto& v : report.violations) {
    if (v.checker == name) return v.what;
  }
  return "";
}

}  // namespace

TEST_CASE("lock-token check flags a token that is not the key's create_revision or shrinks",
          "[chaos]") {
  auto token_finding = [](const std::vector<Acquisition>& h) {
    return LockFinding(h, "lock-token");
  };
  // Worker 1 unlocks at 400 ms, worker 2 gets the lock at 410 ms, worker 3 after 2's lease ran
  // out while paused (end 3000 ms, deadline 1300 ms); worker 1 again with the same lease.
  std::vector<Acquisition> ok = {Hold(1, 0xa, 10, 0, 400, 900), Hold(2, 0xb, 14, 410, 3000, 1300),
                                 Hold(3, 0xc, 20, 1500, 1800, 2400),
                                 Hold(1, 0xa, 25, 1810, 2000, 2700)};
  CHECK(token_finding(ok) == "");
  // Given out of order: the check orders by Lock() return time.
  CHECK(token_finding({ok[3], ok[1], ok[0], ok[2]}) == "");

  // The Mutex handed out the header revision of a later response instead of the key's
  // create_revision (etcdctl's ETCD_LOCK_REV, not a fencing token).
  std::vector<Acquisition> header_as_token = ok;
  header_as_token[1].token = 17;
  header_as_token[1].header_revision = 17;
  CHECK_THAT(token_finding(header_as_token),
             Catch::Contains("not the lock key's create_revision 14"));
  // A completing response older than the key it granted.
  std::vector<Acquisition> old_header = ok;
  old_header[2].header_revision = 19;
  CHECK_THAT(token_finding(old_header), Catch::Contains("header revision 19 is below"));
  // A later holder got a smaller token (the key read agreeing): the grant was not in
  // create_revision order.
  std::vector<Acquisition> shrinking = ok;
  shrinking[2].token = shrinking[2].key_create_revision = 12;
  shrinking[2].header_revision = 12;
  CHECK_THAT(token_finding(shrinking), Catch::Contains("token does not grow"));
  // ... which is no violation when that later Lock() returned after its own deadline: its hold is
  // empty (a worker paused between the grant and the return), so nothing followed it.
  shrinking[2].deadline_ns = 1400 * kMs;
  CHECK(token_finding(shrinking) == "");
  // A key read that failed (0) is no evidence either way.
  std::vector<Acquisition> unread = ok;
  unread[0].key_create_revision = 0;
  CHECK(token_finding(unread) == "");
}

TEST_CASE("lock-overlap check flags a grant while the previous holder's lease was still valid",
          "[chaos]") {
  auto overlap_finding = [](const std::vector<Acquisition>& h) {
    return LockFinding(h, "lock-overlap");
  };
  std::vector<Acquisition> ok = {Hold(1, 0xa, 10, 0, 400, 900), Hold(2, 0xb, 14, 410, 3000, 1300),
                                 Hold(3, 0xc, 20, 1500, 1800, 2400)};
  CHECK(overlap_finding(ok) == "");
  // Worker 3 got the lock at 1250 ms while paused worker 2 could still act until its deadline at
  // 1300 ms: the cluster expired 2's lease (or granted the lock) before the worker-side rule
  // said it could.
  std::vector<Acquisition> early = ok;
  early[2].returned_ns = 1250 * kMs;
  CHECK_THAT(overlap_finding(early), Catch::Contains("50.0 ms before the end of the hold of "
                                                     "worker 2"));
  // A grant before the previous holder sent its Unlock.
  std::vector<Acquisition> before_unlock = ok;
  before_unlock[1].returned_ns = 390 * kMs;
  CHECK_THAT(overlap_finding(before_unlock), Catch::Contains("two holders"));
  // The same lease twice never overlaps itself, and an empty hold (deadline passed before Lock()
  // returned) overlaps nothing.
  std::vector<Acquisition> same_lease = {Hold(1, 0xa, 10, 0, 400, 900),
                                         Hold(1, 0xa, 10, 300, 600, 900)};
  CHECK(overlap_finding(same_lease) == "");
  std::vector<Acquisition> empty = ok;
  empty.push_back(Hold(1, 0xa, 8, 1600, 1700, 1200));
  CHECK(overlap_finding(empty) == "");
}

TEST_CASE("lease-expiry check flags a key read after its lease's deadline plus the bound",
          "[chaos]") {
  epoch::chaos::LeaseObservation o;
  o.worker = 2;
  o.lease = 0x1234;
  o.key = "/lock/job-1/1234";
  o.status_returned_ns = 5'000 * kMs;
  o.remaining_ttl_ms = 900;
  o.max_extension_ms = 1268;
  CHECK(epoch::chaos::LeaseGoneByNs(o) == 7'168 * kMs);
  o.read_sent_ns = 7'170 * kMs;
  o.key_seen = false;
  CHECK_FALSE(epoch::chaos::CheckLeaseExpiry(o).has_value());
  // The key still attached 2 ms after the bound: the cluster kept a lease nobody renewed.
  o.key_seen = true;
  o.seen_create_revision = 41;
  auto v = epoch::chaos::CheckLeaseExpiry(o);
  REQUIRE(v.has_value());
  CHECK(v->checker == "lease-expiry");
  CHECK_THAT(v->what, Catch::Contains("still read 2.0 ms after"));
  // Seen before the bound passed: allowed.
  o.read_sent_ns = 7'100 * kMs;
  CHECK_FALSE(epoch::chaos::CheckLeaseExpiry(o).has_value());
}

TEST_CASE("fault schedule injects every kind within one cycle", "[chaos]") {
  using epoch::chaos::FaultKind;
  auto s = epoch::chaos::FaultSchedule(42, 21);
  std::set<FaultKind> kinds(s.begin(), s.end());
  CHECK(static_cast<int>(kinds.size()) == epoch::chaos::kFaultKinds);
  CHECK(std::count(s.begin(), s.end(), FaultKind::kKillLeader) == 3);
  CHECK(std::count(s.begin(), s.end(), FaultKind::kMemberReplace) == 2);
  CHECK(std::count(s.begin(), s.end(), FaultKind::kClockSkew) == 1);
  // Without runtime membership (peer TLS), a cycle is 19 faults and never a replacement.
  auto tls = epoch::chaos::FaultSchedule(42, 38, {}, false);
  CHECK(std::count(tls.begin(), tls.end(), FaultKind::kMemberReplace) == 0);
  CHECK(static_cast<int>(std::set<FaultKind>(tls.begin(), tls.begin() + 19).size()) ==
        epoch::chaos::kFaultKinds - 1);
  CHECK(epoch::chaos::FaultByName("clock-skew") == FaultKind::kClockSkew);
  CHECK(epoch::chaos::FaultByName("member-replace") == FaultKind::kMemberReplace);
  CHECK(epoch::chaos::FaultSchedule(42, 40) == epoch::chaos::FaultSchedule(42, 40));
  auto kills = epoch::chaos::FaultSchedule(1, 9, {epoch::chaos::FaultKind::kKillLeader});
  CHECK(std::count(kills.begin(), kills.end(), epoch::chaos::FaultKind::kKillLeader) == 9);
  CHECK(epoch::chaos::FaultByName("disk-stall") == epoch::chaos::FaultKind::kDiskStall);
  CHECK_FALSE(epoch::chaos::FaultByName("no-such-fault").has_value());
}

TEST_CASE("epochd hooks - peers dial through the proxies, the disk and clock failpoints obey",
          "[chaos]") {
  auto cc = epoch::chaos::ChaosCluster::Start({EPOCH_EPOCHD_PATH, 3, {}, 7, false});
  REQUIRE(cc.ok());
  epoch::test::TestCluster& tc = (*cc)->nodes();
  auto leader = tc.WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());

  // Bad failpoint requests get a 400 and change nothing; good ones are accepted.
  CHECK_FALSE((*cc)->Disk(*leader, "bogus=1").ok());
  CHECK_FALSE((*cc)->Disk(*leader, "sync_delay_ms=-5").ok());
  CHECK_FALSE((*cc)->Disk(*leader, "sync_delay_ms=99999999").ok());
  CHECK((*cc)->Disk(*leader, "sync_delay_ms=5").ok());
  CHECK((*cc)->Disk(*leader, "clear=1").ok());

  // The clock failpoint refuses rates outside (0, 2]; a rate it accepts drives the leader's
  // cluster clock (the lease manager's clock): at rate 2 it runs at least 1.4 times as fast as
  // this process' monotonic clock between two ClockStatus reads (the reads' own latency only
  // lowers the ratio), where rate 1 would give about 1.
  CHECK_FALSE((*cc)->Clock(*leader, "rate=0").ok());
  CHECK_FALSE((*cc)->Clock(*leader, "rate=2.5").ok());
  CHECK_FALSE((*cc)->Clock(*leader, "bogus=1").ok());
  REQUIRE((*cc)->Clock(*leader, "rate=2").ok());
  {
    epoch::client::ClientOptions o;
    o.endpoints = {(*cc)->ClientEndpoints()[static_cast<std::size_t>(*leader)]};
    auto c = epoch::client::Client::Create(o);
    REQUIRE(c.ok());
    auto first = epoch::client::ClockStatus(**c);
    const auto first_back = std::chrono::steady_clock::now();
    REQUIRE(first.ok());
    REQUIRE(first->leader_clock_running());
    std::int64_t advanced_ms = 0;
    double real_ms = 0;
    CHECK(epoch::test_support::Eventually(
        [&] {
          const auto sent = std::chrono::steady_clock::now();
          auto now = epoch::client::ClockStatus(**c);
          if (!now.ok()) return false;
          advanced_ms = now->now_cluster_ms() - first->now_cluster_ms();
          real_ms = std::chrono::duration<double, std::milli>(sent - first_back).count();
          return advanced_ms >= 2000;
        },
        std::chrono::seconds(10), epoch::test_support::kProcessPoll));
    INFO("cluster clock +" << advanced_ms << " ms in at most " << real_ms << " ms");
    CHECK(static_cast<double>(advanced_ms) > 1.4 * real_ms);
  }
  CHECK((*cc)->Clock(*leader, "clear=1").ok());

  // Cutting the leader's proxied links must make the others elect a new leader: proof that the
  // peer traffic really goes through the proxies (--peer-dial-override).
  for (int j = 0; j < tc.size(); ++j) {
    if (j != *leader) (*cc)->net().SetPair(*leader, j, LinkFault::Cut());
  }
  auto moved = [&] {
    for (int j = 0; j < tc.size(); ++j) {
      if (j == *leader) continue;
      auto s = tc.NodeStatus(j);
      if (s.ok() && s->leader() != 0 && s->leader() != tc.node(*leader).member_id) return true;
    }
    return false;
  };
  CHECK(epoch::test_support::Eventually(moved, std::chrono::seconds(15),
                                        epoch::test_support::kProcessPoll));
  (*cc)->net().HealAll();
  CHECK(tc.WaitHealthy(std::chrono::seconds(20)).ok());
  std::string detail;
  CHECK((*cc)->CheckConverged(std::chrono::seconds(10), &detail).ok());
}

TEST_CASE("a member replaced at run time leads through its entry, and its links are faulted",
          "[chaos][membership]") {
  epoch::chaos::ChaosClusterOptions options{EPOCH_EPOCHD_PATH, 3, {}, 11, false};
  options.snapshot_count = 50;
  auto cc = epoch::chaos::ChaosCluster::Start(options);
  REQUIRE(cc.ok());
  epoch::test::TestCluster& tc = (*cc)->nodes();
  auto leader = tc.WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  // More entries than --snapshot-count: the new member catches up from a snapshot.
  for (int i = 0; i < 120; ++i) {
    auto put = tc.Etcdctl({"put", "k" + std::to_string(i), "v"});
    INFO(put.Describe());
    REQUIRE(put.exit_code == 0);
  }
  const int slot = (*leader + 1) % 3;
  const std::uint64_t old_id = tc.node(slot).member_id;
  REQUIRE((*cc)->RemoveMember(slot, std::chrono::seconds(20)).ok());
  CHECK(tc.ExitStatus(slot) == 1);  // it left by itself once it applied its removal
  auto name = (*cc)->AddLearner(slot, std::chrono::seconds(20));
  INFO(name.status().ToString());
  REQUIRE(name.ok());
  CHECK(*name == "n4");
  CHECK(tc.node(slot).member_id != old_id);
  auto promoted = (*cc)->PromoteWhenCaughtUp(slot, std::chrono::seconds(60));
  INFO(promoted.ToString() << "\n" << tc.LogTail(slot));
  REQUIRE(promoted.ok());
  auto members = (*cc)->Members();
  REQUIRE(members.ok());
  CHECK(members->members_size() == 3);
  auto healthy = tc.WaitHealthy(std::chrono::seconds(20));
  INFO(healthy.status().ToString());
  REQUIRE(healthy.ok());
  // The others dial it at its entry, attributed to their links (not the unfaulted path).
  for (int j = 0; j < 3; ++j) {
    if (j != slot) CHECK((*cc)->net().accepted(j, slot) >= 1);
  }

  // It leads; cutting its proxied links (both directions, every peer) must depose it.
  REQUIRE((*cc)->MoveLeader(*leader == slot ? (*leader + 1) % 3 : *leader, slot).ok());
  REQUIRE(epoch::test_support::Eventually(
      [&] {
        auto l = tc.WaitForLeader(std::chrono::milliseconds(500));
        return l.ok() && *l == slot;
      },
      std::chrono::seconds(15), epoch::test_support::kProcessPoll));
  for (int j = 0; j < 3; ++j) {
    if (j != slot) (*cc)->net().SetPair(slot, j, LinkFault::Cut());
  }
  auto deposed = [&] {
    for (int j = 0; j < 3; ++j) {
      if (j == slot) continue;
      auto s = tc.NodeStatus(j);
      if (s.ok() && s->leader() != 0 && s->leader() != tc.node(slot).member_id) return true;
    }
    return false;
  };
  CHECK(epoch::test_support::Eventually(deposed, std::chrono::seconds(15),
                                        epoch::test_support::kProcessPoll));
  (*cc)->net().HealAll();
  CHECK(tc.WaitHealthy(std::chrono::seconds(20)).ok());
  std::string detail;
  CHECK((*cc)->CheckConverged(std::chrono::seconds(10), &detail).ok());
  CHECK(tc.CheckAlive().ok());
}

TEST_CASE("grow 3 -> 5 and shrink 5 -> 3 under a write load: the history is linearizable",
          "[chaos][membership]") {
  using std::chrono::seconds;
  epoch::chaos::ChaosClusterOptions options{EPOCH_EPOCHD_PATH, 5, {}, 13, false};
  options.initial_members = 3;
  options.snapshot_count = 100;  // the new members join through snapshots
  auto cc = epoch::chaos::ChaosCluster::Start(options);
  REQUIRE(cc.ok());
  epoch::test::TestCluster& tc = (*cc)->nodes();
  REQUIRE(tc.WaitForLeader(seconds(10)).ok());
  // Every slot's endpoint: clients whose member is not running (yet, or any more) move on.
  epoch::chaos::RegisterWorkload load({(*cc)->ClientEndpoints(), 4, 16, "/reg/",
                                       std::chrono::milliseconds(1000),
                                       std::chrono::milliseconds(4), std::chrono::milliseconds(50),
                                       std::chrono::milliseconds(2000), 13});
  load.Start();
  auto progresses = [&] {
    const std::uint64_t before = load.completed_writes();
    return epoch::test_support::Eventually([&] { return load.completed_writes() >= before + 20; },
                                           seconds(20), epoch::test_support::kProcessPoll);
  };
  REQUIRE(progresses());
  for (int slot : {3, 4}) {
    auto name = (*cc)->AddLearner(slot, seconds(20));
    INFO(name.status().ToString());
    REQUIRE(name.ok());
    epoch::Status promoted = (*cc)->PromoteWhenCaughtUp(slot, seconds(60));
    INFO(promoted.ToString() << "\n" << tc.LogTail(slot));
    REQUIRE(promoted.ok());
    REQUIRE(progresses());
  }
  auto five = (*cc)->Members();
  REQUIRE(five.ok());
  CHECK(five->members_size() == 5);
  // Shrink by two of the first members (the leader among them, when it is one).
  for (int slot : {0, 1}) {
    epoch::Status removed = (*cc)->RemoveMember(slot, seconds(30));
    INFO(removed.ToString());
    REQUIRE(removed.ok());
    CHECK(tc.ExitStatus(slot) == 1);
    REQUIRE(progresses());
  }
  load.Stop();
  auto three = (*cc)->Members();
  REQUIRE(three.ok());
  CHECK(three->members_size() == 3);
  epoch::chaos::RegisterReport report = load.Check(std::chrono::milliseconds(60'000));
  INFO(report.lin.description);
  CHECK(report.lin.Ok());
  INFO(report.rev.Describe());
  CHECK(report.rev.Ok());
  CHECK(report.rev.writes > 50);
  CHECK(report.serializable_violation.empty());
  CHECK(report.ok > 100);
  std::string detail;
  epoch::Status converged = (*cc)->CheckConverged(seconds(20), &detail);
  INFO(converged.ToString() << " " << detail);
  CHECK(converged.ok());
}
