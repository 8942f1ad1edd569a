// Fencing end to end (docs/architecture.md §1): two lock holder processes (fencing_holder.cc)
// write to one SQLite row guarded by their fencing tokens. Holder 1 takes the lock, then is
// SIGSTOPped past its lease TTL; holder 2 gets the lock once the cluster expires holder 1's lease,
// and writes; holder 1 is SIGCONTed and writes as if it still held the lock — the database
// rejects it as a StaleFencingToken, and the row keeps holder 2's write.
// Once with client/'s epoch::Mutex (the clientv3 recipe), once with the server's Lock service
// (token from the `epoch-fencing-token` trailing metadata).
#include <fmt/format.h>

#include <csignal>
#include <fstream>
#include <regex>

#include "recipe_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

// The first number after `word ` in the holder's log; REQUIREs it.
std::int64_t NumberAfter(const std::string& log, const std::string& word) {
  std::smatch m;
  const std::string text = ReadFileIfExists(log);
  INFO(log << ":\n" << text);
  REQUIRE(std::regex_search(text, m, std::regex(word + " ([0-9]+)")));
  return std::stoll(m[1].str());
}

test::ChildProcess StartHolder(const TestCluster& cluster, const std::string& name,
                               const std::string& via, const std::string& go_file) {
  std::vector<std::string> argv = {FENCING_HOLDER_PATH,
                                   "--endpoints",
                                   cluster.Endpoints(),
                                   "--lock",
                                   "fence/job-1",
                                   "--db",
                                   cluster.dir() + "/fence.db",
                                   "--job",
                                   "job-1",
                                   "--ttl-ms",
                                   "2000",
                                   "--via",
                                   via};
  if (!go_file.empty()) {
    argv.push_back("--go-file");
    argv.push_back(go_file);
  }
  auto p = test::ChildProcess::Spawn(argv, cluster.dir() + "/" + name + ".log");
  REQUIRE(p.ok());
  return std::move(*p);
}

void RunFencingScenario(const std::string& via) {
  auto cluster = StartCluster();
  const std::string h1_log = cluster->dir() + "/h1.log";
  const std::string h2_log = cluster->dir() + "/h2.log";
  const std::string go_file = cluster->dir() + "/go-h1";

  test::ChildProcess h1 = StartHolder(*cluster, "h1", via, go_file);
  REQUIRE(Eventually([&] { return ReadFileIfExists(h1_log).find("waiting") != std::string::npos; },
                     std::chrono::seconds(20), kProcessPoll));
  const std::int64_t t1 = NumberAfter(h1_log, "acquired");
  h1.Signal(SIGSTOP);  // paused between its check and its write, past its 2 s TTL

  const auto start = std::chrono::steady_clock::now();
  test::ChildProcess h2 = StartHolder(*cluster, "h2", via, "");
  const std::optional<int> h2_exit = h2.WaitExit(std::chrono::seconds(30));
  const auto took_over_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count();
  INFO("h2: " << ReadFileIfExists(h2_log));
  REQUIRE(h2_exit == 0);
  const std::int64_t t2 = NumberAfter(h2_log, "applied");
  CHECK(t2 > t1);
  WARN("fencing e2e (" << via << "): holder 2 took over and wrote " << took_over_ms
                       << " ms after holder 1 was paused (lease TTL 2000 ms)");

  std::ofstream(go_file) << "go\n";
  h1.Signal(SIGCONT);
  const std::optional<int> h1_exit = h1.WaitExit(std::chrono::seconds(30));
  INFO("h1: " << ReadFileIfExists(h1_log));
  CHECK(h1_exit == 3);
  CHECK(ReadFileIfExists(h1_log).find(fmt::format("stale {} {}", t1, t2)) != std::string::npos);

  CommandResult row = test::RunCommand(
      {FENCING_HOLDER_PATH, "--db", cluster->dir() + "/fence.db", "--job", "job-1", "--read"}, {},
      std::chrono::seconds(10));
  INFO(row.Describe());
  CHECK(row.out == fmt::format("row {} 1 done holder {}\n", t2, t2));
}

TEST_CASE("Fencing end to end: a paused epoch::Mutex holder's late write is rejected as stale",
          "[integration][fencing]") {
  RunFencingScenario("mutex");
}

TEST_CASE("Fencing end to end: a paused Lock service holder's late write is rejected as stale",
          "[integration][fencing]") {
  RunFencingScenario("service");
}

}  // namespace
}  // namespace epoch::integration
