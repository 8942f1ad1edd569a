// epochd's zap-style JSON logs in a real 3-member cluster (docs/logging.md): every line a node
// writes parses as JSON with level, ts and msg; a leader change leaves one "leader changed" line
// on each member naming the new leader and term, the winner's election ("became candidate",
// "became leader") is logged, and a member restarted behind the compacted log leaves the whole
// snapshot trail: created, sending and sent on the leader, received and installed on it; a member
// added and removed is logged by every member with the member's id and the new voter and learner
// counts.
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <sstream>

#include "support.h"

namespace epoch::integration {
namespace {

using google::protobuf::Struct;
using std::chrono::seconds;

// Lines the test harness itself writes into a node's log.
bool HarnessLine(const std::string& line) { return line.starts_with("==== TestCluster:"); }

// Every line of node i's log but the harness's, parsed (REQUIREd to parse, with level/ts/msg).
std::vector<Struct> JsonLines(const TestCluster& cluster, int i) {
  std::istringstream log(ReadFileIfExists(cluster.node(i).log_path));
  std::vector<Struct> lines;
  for (std::string line; std::getline(log, line);) {
    if (line.empty() || HarnessLine(line)) continue;
    Struct parsed;
    INFO("node " << i << " line: " << line);
    REQUIRE(google::protobuf::util::JsonStringToMessage(line, &parsed).ok());
    for (const char* key : {"level", "ts", "msg"}) REQUIRE(parsed.fields().contains(key));
    lines.push_back(std::move(parsed));
  }
  return lines;
}

std::string Text(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? std::string() : it->second.string_value();
}

double Number(const Struct& s, const std::string& key) {
  auto it = s.fields().find(key);
  return it == s.fields().end() ? -1 : it->second.number_value();
}

// The lines of node i whose msg contains `text` and whose fields match `fields`.
std::vector<Struct> Find(const TestCluster& cluster, int i, const std::string& text,
                         const std::vector<std::pair<std::string, std::string>>& fields = {}) {
  std::vector<Struct> found;
  for (Struct& line : JsonLines(cluster, i)) {
    if (Text(line, "msg").find(text) == std::string::npos) continue;
    bool match = true;
    for (const auto& [key, value] : fields) match = match && Text(line, key) == value;
    if (match) found.push_back(std::move(line));
  }
  return found;
}

bool Logged(const TestCluster& cluster, int i, const std::string& text,
            const std::vector<std::pair<std::string, std::string>>& fields = {}) {
  return Eventually([&] { return !Find(cluster, i, text, fields).empty(); }, seconds(20),
                    kProcessPoll);
}

TEST_CASE("logs: JSON lines with the leader change, election and snapshot events",
          "[integration][logging]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--snapshot-count", "100", "--snapshot-catchup-entries", "10",
                             "--logger", "zap", "--log-outputs", "stderr"});
  auto cluster = StartCluster(3, flags);
  Result<int> first = cluster->WaitForLeader(seconds(10));
  REQUIRE(first.ok());
  const int old_leader = *first;
  auto status = cluster->NodeStatus(old_leader);
  REQUIRE(status.ok());
  const double old_term = static_cast<double>(status->raftterm());

  REQUIRE(cluster->Stop(old_leader).ok());
  Result<int> second = cluster->WaitForLeader(seconds(10), old_leader);
  REQUIRE(second.ok());
  const int leader = *second;
  const std::string leader_id = Hex(cluster->node(leader).member_id);

  // Each surviving member logs the change to the new leader, with a later term.
  for (int i = 0; i < cluster->size(); ++i) {
    if (i == old_leader) continue;
    INFO("node " << i);
    REQUIRE(Logged(*cluster, i, "leader changed", {{"leader", leader_id}}));
    const Struct line = Find(*cluster, i, "leader changed", {{"leader", leader_id}}).back();
    CHECK(Text(line, "node") == Hex(cluster->node(i).member_id));
    CHECK(Number(line, "term") > old_term);
    CHECK(Text(line, "caller").starts_with("replication/raft_driver.cc:"));
    CHECK(Text(line, "level") == "info");
  }
  // The winner campaigned and won.
  CHECK(Logged(*cluster, leader, "became candidate", {{"node", leader_id}}));
  CHECK(Logged(*cluster, leader, "became leader", {{"node", leader_id}}));

  // Writes past --snapshot-count compact the log; the old leader, restarted behind it, gets a
  // snapshot.
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(leader));
  for (int i = 0; i < 250; ++i) REQUIRE(Put(*kv, fmt::format("logs/{:04}", i), "v").ok());
  REQUIRE(Logged(*cluster, leader, "created snapshot", {{"node", leader_id}}));
  CHECK(Number(Find(*cluster, leader, "created snapshot").back(), "index") >= 100);
  REQUIRE(cluster->StartNode(old_leader).ok());
  const std::string old_id = Hex(cluster->node(old_leader).member_id);
  CHECK(Logged(*cluster, leader, "sending snapshot", {{"node", leader_id}, {"to", old_id}}));
  CHECK(Logged(*cluster, leader, "sent snapshot", {{"node", leader_id}, {"to", old_id}}));
  CHECK(Logged(*cluster, old_leader, "received snapshot", {{"node", old_id}, {"from", leader_id}}));
  REQUIRE(Logged(*cluster, old_leader, "installed snapshot", {{"node", old_id}}));
  CHECK(Number(Find(*cluster, old_leader, "installed snapshot").back(), "index") >= 100);
  // And nothing any member wrote was anything but a JSON line.
  for (int i = 0; i < cluster->size(); ++i) CHECK(JsonLines(*cluster, i).size() > 5);
}

TEST_CASE("logs: every member logs a member added as learner and then removed",
          "[integration][logging][membership]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--logger", "zap", "--log-outputs", "stderr"});
  auto cluster = StartCluster(3, flags);
  Result<int> leader = cluster->WaitForLeader(seconds(10));
  REQUIRE(leader.ok());
  auto members = etcdserverpb::Cluster::NewStub(cluster->Channel(*leader));

  etcdserverpb::MemberAddRequest add;
  add.add_peerurls("http://127.0.0.1:1");  // never started: a learner does not count for quorum
  add.set_islearner(true);
  etcdserverpb::MemberAddResponse added;
  grpc::ClientContext add_ctx;
  REQUIRE(members->MemberAdd(&add_ctx, add, &added).ok());
  const std::string learner = Hex(added.member().id());

  etcdserverpb::MemberRemoveRequest remove;
  remove.set_id(added.member().id());
  etcdserverpb::MemberRemoveResponse removed;
  grpc::ClientContext remove_ctx;
  REQUIRE(members->MemberRemove(&remove_ctx, remove, &removed).ok());

  for (int i = 0; i < cluster->size(); ++i) {
    INFO("node " << i);
    const std::string self = Hex(cluster->node(i).member_id);
    REQUIRE(Logged(*cluster, i, "applied conf change add-learner", {{"member", learner}}));
    const Struct add_line =
        Find(*cluster, i, "applied conf change add-learner", {{"member", learner}}).back();
    CHECK(Text(add_line, "node") == self);
    CHECK(Number(add_line, "voters") == 3);
    CHECK(Number(add_line, "learners") == 1);
    REQUIRE(Logged(*cluster, i, "applied conf change remove-member", {{"member", learner}}));
    const Struct remove_line =
        Find(*cluster, i, "applied conf change remove-member", {{"member", learner}}).back();
    CHECK(Number(remove_line, "index") > Number(add_line, "index"));
    CHECK(Number(remove_line, "learners") == 0);
  }
}

TEST_CASE("logs: --logger=capnslog writes plain lines after its deprecation warning",
          "[integration][logging]") {
  std::vector<std::string> flags = test::ClusterOptions{}.extra_flags;
  flags.insert(flags.end(), {"--logger", "capnslog"});
  auto cluster = StartCluster(1, flags);
  const std::string log = ReadFileIfExists(cluster->node(0).log_path);
  INFO(log.substr(0, 4000));
  CHECK(log.find(" warning --logger=capnslog is deprecated") != std::string::npos);
  CHECK(log.find(" info leader changed node=") != std::string::npos);
  CHECK(log.find("{\"level\"") == std::string::npos);
}

}  // namespace
}  // namespace epoch::integration
