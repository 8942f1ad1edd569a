// The Python worker (client/python/fenced_worker.py) as a process against a real 3-node epochd
// cluster: next to the C++ example worker on one queue and one SQLite file, paused past its
// lease with self-fencing off (the database guard rejects its late write), and paused past its
// lease with the default poison pill (it kills itself before writing anything).
#include <signal.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

#include "jobs_support.h"
#include "test_support.h"

namespace epoch::client {
namespace {

using namespace jobs_test;  // NOLINT(google-build-using-namespace): the suite's fixtures

// argv of the Python worker with the generated stubs and its package on PYTHONPATH.
std::vector<std::string> PythonWorker(const test::TestCluster& cluster, const SqliteFile& file,
                                      const std::string& name, std::vector<std::string> extra) {
  std::vector<std::string> argv = {
      "/usr/bin/env", std::string("PYTHONPATH=") + PY_STUBS_DIR + ":" + PY_WORKER_DIR,
      WORKER_PYTHON,  std::string(PY_WORKER_DIR) + "/fenced_worker.py",
      "--endpoints",  cluster.Endpoints(),
      "--prefix",     kKeys.prefix,
      "--sqlite",     file.path.string(),
      "--worker",     name};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

bool Logged(const std::filesystem::path& log, const std::string& text) {
  return FileTail(log, 1'000'000).find(text) != std::string::npos;
}

int CountLines(const std::filesystem::path& log, const std::string& text) {
  const std::string all = FileTail(log, 1'000'000);
  int n = 0;
  for (std::size_t at = all.find(text); at != std::string::npos; at = all.find(text, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("Python and C++ workers share a queue and a database: every stage committed once",
          "[jobs][python]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(Enqueue(*client, "j" + std::to_string(i), {"reserve", "charge", "ship"}));
  }
  SqliteFile::Connection init(file.path);  // both tables, before three processes race for them

  const auto py1_log = file.dir.Sub("py1.log");
  const auto py2_log = file.dir.Sub("py2.log");
  const auto cc_log = file.dir.Sub("cc.log");
  const std::vector<std::string> flags = {"--stage-ms", "150", "--max-runtime-s", "90"};
  testing::ChildProcess py1(PythonWorker(*cluster, file, "py1", flags), py1_log);
  testing::ChildProcess py2(
      PythonWorker(*cluster, file, "py2", {"--seed", "2", flags[0], flags[1], flags[2], flags[3]}),
      py2_log);
  INFO(FileTail(py1_log));
  REQUIRE(Eventually(
      [&] { return Logged(py1_log, "event=commit ") || Logged(py2_log, "event=commit "); },
      seconds(30), kProcessPoll));
  testing::ChildProcess cc({FENCED_WORKER_PATH, "--endpoints", cluster->Endpoints(), "--prefix",
                            kKeys.prefix, "--sqlite", file.path.string(), "--worker", "cc",
                            "--seed", "3", "--stage-ms", "150", "--max-runtime-s", "90"},
                           cc_log);
  REQUIRE(Eventually([&] { return !py1.Running() && !py2.Running() && !cc.Running(); },
                     seconds(120), kProcessPoll));
  CHECK(Logged(py1_log, "event=idle worker=py1"));
  CHECK(Logged(py2_log, "event=idle worker=py2"));

  CHECK(CountPrefix(*client, kKeys.Jobs()) == 0);
  CHECK(CountPrefix(*client, kKeys.Done()) == 6);
  int logged_commits = 0;
  for (const auto& log : {py1_log, py2_log, cc_log})
    logged_commits += CountLines(log, "event=commit ");
  CHECK(logged_commits == 18);
  CHECK(CountLines(py1_log, "event=commit ") + CountLines(py2_log, "event=commit ") > 0);
  for (const JobSpec& job : jobs) {
    const Effects effects = file.Of(job.id);
    REQUIRE(effects.size() == 3);
    auto record = ParseEpochRecord(Value(*client, kKeys.Epoch(job.id)).value_or(""));
    REQUIRE(record.ok());
    for (std::size_t s = 0; s < 3; ++s) {
      CHECK(effects[s].first == static_cast<std::int64_t>(s + 1));
    }
    CHECK(effects[2].second == record->token.value());  // the completing holder's token
    auto row = init.store->ReadJob(job.id);
    REQUIRE(row.ok());
    CHECK(row->state == "done");
  }
}

TEST_CASE("A Python worker paused past its lease without self-fencing has its late write rejected",
          "[jobs][python][process]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  const JobSpec job = Enqueue(*client, "slow", {"a", "b", "c"});

  const auto log = file.dir.Sub("py.log");
  testing::ChildProcess worker(PythonWorker(*cluster, file, "paused",
                                            {"--ttl-s", "1", "--stage-ms", "1500", "--self-fencing",
                                             "false", "--max-runtime-s", "60"}),
                               log);
  INFO(FileTail(log));
  REQUIRE(Eventually([&] { return Logged(log, "event=commit job=slow stage=1 "); }, seconds(20),
                     kProcessPoll));
  REQUIRE(worker.Pause());  // now inside stage 2's work

  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("slow") + "/") == 0; },
                     seconds(15), kProcessPoll));
  auto session = NewSession(client.get());
  Worker takeover(client.get(), db.store.get(), db.effects.get());
  SessionRef ref(session.get());
  REQUIRE(takeover.runner->RunOnce(job, ref).outcome == JobOutcome::kCompleted);
  const std::int64_t newer = takeover.events.front().token.value();

  REQUIRE(::kill(worker.pid(), SIGCONT) == 0);
  REQUIRE(Eventually([&] { return Logged(log, "event=rejected job=slow stage=2 "); }, seconds(20),
                     kProcessPoll));
  CHECK(Logged(log, "a newer holder committed"));
  const Effects effects = file.Of("slow");
  REQUIRE(effects.size() == 3);
  CHECK(effects[0].second < newer);  // stage 1 by the paused worker
  CHECK(effects[1] == std::pair<std::int64_t, std::int64_t>{2, newer});
  CHECK(effects[2] == std::pair<std::int64_t, std::int64_t>{3, newer});
  auto row = db.store->ReadJob("slow");
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(newer));
}

TEST_CASE("A Python worker paused past its lease swallows its poison pill before writing",
          "[jobs][python][process]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  const JobSpec job = Enqueue(*client, "slow", {"a", "b", "c"});

  const auto log = file.dir.Sub("py.log");
  testing::ChildProcess worker(  // the defaults: self-fencing and the poison pill on
      PythonWorker(*cluster, file, "pill",
                   {"--ttl-s", "1", "--stage-ms", "1500", "--max-runtime-s", "60"}),
      log);
  INFO(FileTail(log));
  REQUIRE(Eventually([&] { return Logged(log, "event=commit job=slow stage=1 "); }, seconds(20),
                     kProcessPoll));
  REQUIRE(worker.Pause());

  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("slow") + "/") == 0; },
                     seconds(15), kProcessPoll));
  auto session = NewSession(client.get());
  Worker takeover(client.get(), db.store.get(), db.effects.get());
  SessionRef ref(session.get());
  REQUIRE(takeover.runner->RunOnce(job, ref).outcome == JobOutcome::kCompleted);
  const std::int64_t newer = takeover.events.front().token.value();

  REQUIRE(::kill(worker.pid(), SIGCONT) == 0);
  REQUIRE(Eventually([&] { return !worker.Running(); }, seconds(20), kProcessPoll));
  CHECK(Logged(log, "event=poison_pill worker=pill "));
  // It died before trying anything with its old token: no attempt, not even a rejected one.
  CHECK(CountLines(log, "event=commit ") == 1);
  CHECK_FALSE(Logged(log, "event=rejected"));
  const Effects effects = file.Of("slow");
  REQUIRE(effects.size() == 3);
  CHECK(effects[0].second < newer);
  CHECK(effects[1].second == newer);
  CHECK(effects[2].second == newer);
}

}  // namespace epoch::client
