// Watch through etcdctl 3.4 against a real 3-node cluster: history replay with --rev,
// --prefix and --prev-kv; live events; the compacted-start cancel; the hasleader metadata when
// quorum is lost; and a watch resumed at last+1 on another member after the leader it was
// watching is SIGKILLed under write load — nothing lost, nothing seen twice.
//
// A long-running `etcdctl watch` is a child process whose output goes to a file the test reads
// while it runs (conditions polled with deadlines, never fixed sleeps).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

using Clock = std::chrono::steady_clock;

// One event as etcdctl's simple format prints it: type, key, value (no --prev-kv).
struct PrintedEvent {
  std::string type;
  std::string key;
  std::string value;
};

// Every line of `text`, empty ones included (a DELETE prints an empty value line).
std::vector<std::string> RawLines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a line still being written
    out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// Complete (type, key, value) triples; anything else (etcdctl's error lines) is skipped.
std::vector<PrintedEvent> ParseEvents(const std::string& text) {
  std::vector<std::string> lines = RawLines(text);
  std::vector<PrintedEvent> out;
  for (std::size_t i = 0; i < lines.size();) {
    if ((lines[i] == "PUT" || lines[i] == "DELETE") && i + 2 < lines.size()) {
      out.push_back({lines[i], lines[i + 1], lines[i + 2]});
      i += 3;
    } else {
      ++i;
    }
  }
  return out;
}

// `etcdctl watch ...` running in the background, its stdout and stderr in a file.
class BackgroundWatch {
 public:
  BackgroundWatch(TestCluster& cluster, int node, const std::vector<std::string>& args,
                  const std::string& name)
      : log_path_(cluster.dir() + "/" + name + ".log") {
    std::vector<std::string> argv = {test::kEtcdctlPath,
                                     "--endpoints=" + cluster.node(node).client_address(), "watch"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<test::ChildProcess> child = test::ChildProcess::Spawn(argv, log_path_);
    INFO(child.status().ToString());
    REQUIRE(child.ok());
    process_ = std::move(*child);
  }
  ~BackgroundWatch() { process_.KillAndReap(); }

  [[nodiscard]] std::string Output() const { return ReadFileIfExists(log_path_); }
  [[nodiscard]] std::vector<PrintedEvent> Events() const { return ParseEvents(Output()); }

  // Polls until `done(events)` holds or `timeout` passes.
  template <typename Pred>
  bool WaitFor(Pred done, std::chrono::milliseconds timeout) const {
    return Eventually([&] { return done(Events()); }, timeout, kProcessPoll);
  }

  test::ChildProcess& process() { return process_; }

 private:
  std::string log_path_;
  test::ChildProcess process_;
};

std::int64_t PutRevision(TestCluster& cluster, int node, const std::string& key,
                         const std::string& value) {
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(node));
  etcdserverpb::PutResponse response;
  grpc::Status s = Put(*kv, key, value, &response);
  INFO("put " << key << ": " << s.error_message());
  REQUIRE(s.ok());
  return response.header().revision();
}

TEST_CASE("etcdctl watch --prefix --rev --prev-kv replays history inclusively",
          "[integration][watch]") {
  auto cluster = StartCluster();
  const std::int64_t first = PutRevision(*cluster, 0, "a/1", "v1");
  PutRevision(*cluster, 0, "a/2", "v2");
  PutRevision(*cluster, 0, "b/1", "x");
  PutRevision(*cluster, 0, "a/1", "v1b");
  EtcdctlOk(*cluster, {"del", "a/2"});
  PutRevision(*cluster, 0, "a/3", "v3");

  // From a follower and from the leader alike: every member applies the same log.
  for (int node = 0; node < cluster->size(); ++node) {
    INFO("watching through " << cluster->node(node).name);
    test::CommandResult r =
        cluster->Etcdctl({"watch", "--prefix", "a/", "--rev", std::to_string(first), "--prev-kv"},
                         {}, cluster->node(node).client_address(), std::chrono::seconds(3));
    INFO(r.Describe());
    CHECK(r.timed_out);  // a watch runs until killed
    std::vector<std::string> want = {"PUT", "a/1", "v1",  "PUT", "a/2",    "v2",  "PUT",
                                     "a/1", "v1",  "a/1", "v1b", "DELETE", "a/2", "v2",
                                     "a/2", "",    "PUT", "a/3", "v3"};
    CHECK(RawLines(r.out) == want);
  }
  // Without --prev-kv, from a later revision: only what follows.
  test::CommandResult r =
      cluster->Etcdctl({"watch", "--prefix", "a/", "--rev", std::to_string(first + 3)}, {},
                       std::nullopt, std::chrono::seconds(3));
  INFO(r.Describe());
  std::vector<std::string> want = {"PUT", "a/1", "v1b", "DELETE", "a/2", "", "PUT", "a/3", "v3"};
  CHECK(RawLines(r.out) == want);
}

TEST_CASE("etcdctl watch sees live events in order from its creation on", "[integration][watch]") {
  auto cluster = StartCluster();
  BackgroundWatch watch(*cluster, 1, {"live/k"}, "watch-live");
  // The watch starts at its created revision: probe until it shows a first event.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  int probes = 0;
  bool connected = false;
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (!connected && Clock::now() < deadline) {
    REQUIRE(Put(*kv, "live/k", fmt::format("probe-{}", probes++)).ok());
    connected = watch.WaitFor([](const auto& events) { return !events.empty(); },
                              std::chrono::milliseconds(100));
  }
  REQUIRE(connected);
  for (int i = 0; i < 20; ++i) REQUIRE(Put(*kv, "live/k", fmt::format("after-{}", i)).ok());
  REQUIRE(watch.WaitFor(
      [](const auto& events) { return !events.empty() && events.back().value == "after-19"; },
      std::chrono::seconds(10)));
  std::vector<PrintedEvent> events = watch.Events();
  // Contiguous from the first probe it saw: probe-j, ..., probe-(n-1), after-0, ..., after-19.
  REQUIRE(events.front().value.rfind("probe-", 0) == 0);
  int j = std::stoi(events.front().value.substr(6));
  std::vector<std::string> want;
  for (int p = j; p < probes; ++p) want.push_back(fmt::format("probe-{}", p));
  for (int i = 0; i < 20; ++i) want.push_back(fmt::format("after-{}", i));
  std::vector<std::string> got;
  for (const auto& e : events) {
    CHECK(e.type == "PUT");
    CHECK(e.key == "live/k");
    got.push_back(e.value);
  }
  CHECK(got == want);
}

TEST_CASE("etcdctl watch --prev-kv sees each live PUT's previous value", "[integration][watch]") {
  // epochd leaves previous values out of applied events unless a watcher asked for them
  // (KvStoreOptions::lazy_prev_values): this watcher must get them all the same.
  auto cluster = StartCluster();
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(0));
  REQUIRE(Put(*kv, "live/p", "v0").ok());
  BackgroundWatch watch(*cluster, 2, {"live/p", "--prev-kv"}, "watch-prev");
  int probes = 0;
  bool connected = false;
  auto deadline = Clock::now() + std::chrono::seconds(15);
  while (!connected && Clock::now() < deadline) {
    REQUIRE(Put(*kv, "live/p", fmt::format("probe-{}", probes++)).ok());
    connected = watch.WaitFor([&](const auto&) { return !watch.Output().empty(); },
                              std::chrono::milliseconds(100));
  }
  REQUIRE(connected);
  for (int i = 0; i < 10; ++i) REQUIRE(Put(*kv, "live/p", fmt::format("after-{}", i)).ok());
  const std::vector<std::string> tail = {"PUT", "live/p", "after-8", "live/p", "after-9"};
  auto ends_with_tail = [&] {
    std::vector<std::string> lines = RawLines(watch.Output());
    return lines.size() >= tail.size() &&
           std::equal(tail.begin(), tail.end(), lines.end() - static_cast<long>(tail.size()));
  };
  REQUIRE(watch.WaitFor([&](const auto&) { return ends_with_tail(); }, std::chrono::seconds(10)));
  // Every event printed with its previous version: PUT, prev key, prev value, key, value — each
  // value the one put before it.
  std::vector<std::string> lines = RawLines(watch.Output());
  REQUIRE(lines.size() % 5 == 0);
  for (std::size_t i = 0; i < lines.size(); i += 5) {
    INFO("event " << i / 5);
    CHECK(lines[i] == "PUT");
    CHECK(lines[i + 1] == "live/p");
    CHECK(lines[i + 3] == "live/p");
    if (i >= 5) CHECK(lines[i + 2] == lines[i - 1]);  // prev value = the value of the event before
  }
  REQUIRE(lines.size() >= 10 * 5);
  CHECK(lines[lines.size() - 10 * 5 + 4] ==
        "after-0");  // the value of the tenth event from the end
}

TEST_CASE("etcdctl watch from a compacted revision is canceled with the compaction error",
          "[integration][watch]") {
  auto cluster = StartCluster();
  std::vector<std::int64_t> revs;
  for (int i = 0; i < 5; ++i) revs.push_back(PutRevision(*cluster, 0, "c/k", std::to_string(i)));
  EtcdctlOk(*cluster, {"compact", std::to_string(revs[3])});

  test::CommandResult r = cluster->Etcdctl({"watch", "c/k", "--rev", std::to_string(revs[1])}, {},
                                           std::nullopt, std::chrono::seconds(10));
  INFO(r.Describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("required revision has been compacted") != std::string::npos);
  CHECK(r.out.empty());

  // At the compact revision itself the history is still there.
  r = cluster->Etcdctl({"watch", "c/k", "--rev", std::to_string(revs[3])}, {}, std::nullopt,
                       std::chrono::seconds(3));
  INFO(r.Describe());
  CHECK(r.timed_out);
  std::vector<std::string> want = {"PUT", "c/k", "3", "PUT", "c/k", "4"};
  CHECK(RawLines(r.out) == want);
}

TEST_CASE("hasleader: a watch on a member that lost quorum ends with 'etcdserver: no leader'",
          "[integration][watch]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int survivor = (*leader + 1) % cluster->size();
  BackgroundWatch watch(*cluster, survivor, {"q/k"}, "watch-quorum");
  // The stream is up once an event arrives.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(survivor));
  bool connected = false;
  for (int i = 0; i < 100 && !connected; ++i) {
    REQUIRE(Put(*kv, "q/k", std::to_string(i)).ok());
    connected =
        watch.WaitFor([](const auto& e) { return !e.empty(); }, std::chrono::milliseconds(100));
  }
  REQUIRE(connected);

  for (int i = 0; i < cluster->size(); ++i) {
    if (i != survivor) cluster->Kill(i);
  }
  auto killed_at = Clock::now();
  std::optional<int> exit = watch.process().WaitExit(std::chrono::seconds(20));
  auto ended_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed_at).count();
  INFO(watch.Output());
  REQUIRE(exit.has_value());
  CHECK(*exit != 0);
  CHECK(watch.Output().find(std::string(epoch::etcd_errors::kNoLeader.message)) !=
        std::string::npos);
  fmt::print("hasleader: etcdctl watch ended {} ms after quorum loss\n", ended_ms);

  // A new watch is refused at once.
  test::CommandResult r = cluster->Etcdctl(
      {"watch", "q/k"}, {}, cluster->node(survivor).client_address(), std::chrono::seconds(10));
  INFO(r.Describe());
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code != 0);
  CHECK(r.err.find(std::string(epoch::etcd_errors::kNoLeader.message)) != std::string::npos);
}

// Puts w/<id>/<seq> (each key once) until stopped, rotating to the next node after a failure.
class Writer {
 public:
  Writer(TestCluster& cluster, int id, std::atomic<bool>& stop)
      : cluster_(cluster), id_(id), stop_(stop), node_(id % cluster.size()) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Writer() { Join(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] std::size_t acked() const { return acked_.load(); }
  // (key, revision) of every acknowledged put; after Join().
  [[nodiscard]] const std::vector<std::pair<std::string, std::int64_t>>& acks() const {
    return acks_;
  }

 private:
  void Run() {
    std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> stubs;
    for (int i = 0; i < cluster_.size(); ++i) {
      stubs.push_back(etcdserverpb::KV::NewStub(cluster_.Channel(i)));
    }
    for (int seq = 0; seq < 20000 && !stop_.load(); ++seq) {
      std::string key = fmt::format("w/{}/{:05}", id_, seq);
      etcdserverpb::PutResponse response;
      grpc::Status s = Put(*stubs[static_cast<std::size_t>(node_)], key, "v", &response,
                           std::chrono::seconds(2));
      if (s.ok()) {
        acks_.emplace_back(key, response.header().revision());
        acked_.fetch_add(1);
      } else {
        node_ = (node_ + 1) % cluster_.size();
      }
    }
  }

  TestCluster& cluster_;
  const int id_;
  std::atomic<bool>& stop_;
  int node_;
  std::vector<std::pair<std::string, std::int64_t>> acks_;
  std::atomic<std::size_t> acked_{0};
  std::thread thread_;
};

std::size_t TotalAcked(const std::vector<std::unique_ptr<Writer>>& writers) {
  std::size_t n = 0;
  for (const auto& w : writers) n += w->acked();
  return n;
}

bool WaitAcked(const std::vector<std::unique_ptr<Writer>>& writers, std::size_t target,
               std::chrono::seconds timeout) {
  return Eventually([&] { return TotalAcked(writers) >= target; }, timeout,
                    std::chrono::milliseconds(5));
}

TEST_CASE(
    "a watch resumed at last+1 on another member after SIGKILL of the leader loses "
    "nothing and repeats nothing",
    "[integration][watch][failover]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const std::int64_t start =
      MustRange(*cluster, *leader, "w/", PrefixEnd("w/")).header().revision();

  // Watch through the leader itself: its death breaks the stream mid-flow.
  auto first = std::make_unique<BackgroundWatch>(
      *cluster, *leader,
      std::vector<std::string>{"--prefix", "w/", "--rev", std::to_string(start + 1)},
      "watch-before");
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Writer>> writers;
  for (int i = 0; i < 3; ++i) writers.push_back(std::make_unique<Writer>(*cluster, i, stop));
  auto stop_writers = [&] {
    stop = true;
    for (auto& w : writers) w->Join();
  };
  bool warmed =
      WaitAcked(writers, 150, std::chrono::seconds(30)) &&
      first->WaitFor([](const auto& e) { return e.size() >= 50; }, std::chrono::seconds(20));
  if (!warmed) stop_writers();
  REQUIRE(warmed);
  const std::size_t before_kill = TotalAcked(writers);
  cluster->Kill(*leader);
  Result<int> new_leader = cluster->WaitForLeader(std::chrono::seconds(15), *leader);
  bool resumed = new_leader.ok() && WaitAcked(writers, before_kill + 150, std::chrono::seconds(30));
  stop_writers();
  REQUIRE(new_leader.ok());
  REQUIRE(resumed);
  first->process().KillAndReap();  // it was retrying the dead member
  std::vector<PrintedEvent> seen = first->Events();
  REQUIRE(!seen.empty());

  // The whole history of w/ after `start`: each key was written once, so key <-> revision.
  etcdserverpb::RangeResponse dump = MustRange(*cluster, *new_leader, "w/", PrefixEnd("w/"));
  std::map<std::string, std::int64_t> revision_of;
  std::vector<std::pair<std::int64_t, std::string>> history;
  for (const auto& kv : dump.kvs()) {
    revision_of[kv.key()] = kv.mod_revision();
    history.emplace_back(kv.mod_revision(), kv.key());
  }
  std::sort(history.begin(), history.end());
  // What the dead leader sent was committed: every key it showed is in the new leader's state.
  for (const auto& e : seen) REQUIRE(revision_of.contains(e.key));
  const std::int64_t last = revision_of.at(seen.back().key);

  // Resume on a member that is not the new leader when possible (any survivor will do).
  int member = *new_leader;
  for (int i = 0; i < cluster->size(); ++i) {
    if (i != *leader && i != *new_leader) member = i;
  }
  BackgroundWatch second(*cluster, member, {"--prefix", "w/", "--rev", std::to_string(last + 1)},
                         "watch-after");
  const std::string final_key = history.back().second;
  bool caught_up =
      second.WaitFor([&](const auto& e) { return !e.empty() && e.back().key == final_key; },
                     std::chrono::seconds(30));
  INFO("resumed on " << cluster->node(member).name << " at " << last + 1);
  REQUIRE(caught_up);
  for (const auto& e : second.Events()) seen.push_back(e);

  std::vector<std::string> got, want;
  for (const auto& e : seen) {
    CHECK(e.type == "PUT");
    got.push_back(e.key);
  }
  for (const auto& [rev, key] : history) want.push_back(key);
  CHECK(got.size() == want.size());
  CHECK(got == want);  // nothing lost, nothing twice, revision order
  std::size_t acked = 0;
  for (const auto& w : writers) {
    for (const auto& [key, rev] : w->acks()) {
      ++acked;
      CHECK(revision_of[key] == rev);
    }
  }
  fmt::print(
      "watch resume: {} events over a leader kill ({} acked puts), first stream stopped "
      "at revision {}, resumed on {}\n",
      got.size(), acked, last, cluster->node(member).name);
}

}  // namespace
}  // namespace epoch::integration
