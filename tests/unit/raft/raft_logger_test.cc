// The injected Logger sees the core's events and never changes its behaviour.
#include <algorithm>
#include <catch2/catch.hpp>

#include "epoch/raft/logger.h"
#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

class RecordingLogger : public Logger {
 public:
  void Log(LogLevel level, NodeId node, Term term, std::string_view message) override {
    lines.push_back(fmt::format("{} n{} t{} {}", static_cast<int>(level), node, term, message));
  }
  std::vector<std::string> lines;
};

std::vector<std::string> Trace(Logger* logger) {
  TestCluster c(
      3, [&](Config& k) { k.logger = logger; }, 42);
  c.Run(60);
  if (NodeId leader = c.Leader(); leader != kNoNode) {
    (void)c.node(leader.value()).Propose({"x"});
    (void)c.node(leader.value()).TransferLeadership(leader.value() == 1 ? Id(2) : Id(1));
  }
  c.Run(20);
  std::vector<std::string> out;
  for (const Message& m : c.sent()) out.push_back(DescribeMessage(m));
  return out;
}

TEST_CASE("logger: receives events and does not change behaviour", "[raft][logger]") {
  RecordingLogger logger;
  const std::vector<std::string> with = Trace(&logger);
  const std::vector<std::string> without = Trace(nullptr);
  CHECK(with == without);
  const auto mentions = [&](std::string_view what) {
    return std::any_of(logger.lines.begin(), logger.lines.end(),
                       [&](const std::string& l) { return l.find(what) != std::string::npos; });
  };
  CHECK(mentions("became leader"));
  CHECK(mentions("transferring leadership"));
}

// The member-change event of docs/logging.md: kind, member and index as key=value fields.
TEST_CASE("logger: an applied conf change names its kind, member and index", "[raft][logger]") {
  RecordingLogger logger;
  TestCluster c(
      3, [&](Config& k) { k.logger = &logger; }, 7);
  c.BootAndElect(1);
  c.AddEmptyNode(4);
  auto proposed = c.node(1).ProposeConfChange(ConfChange{ConfChangeType::kAddLearner, Id(4)});
  REQUIRE(proposed.ok());
  c.Run(10);
  const std::string expected = fmt::format(
      "applied conf change add-learner member=4 index={} voters=3 learners=1", proposed.last_index);
  const auto applied = std::count_if(logger.lines.begin(), logger.lines.end(), [&](auto& l) {
    return l.find(expected) != std::string::npos;
  });
  CHECK(applied >= 3);  // once on each voter (and on the learner, if it applies the entry)
}

}  // namespace
}  // namespace epoch::raft::test
