// JobRunner and EpochJobLeases against a real 3-node epochd cluster: SQLite and a real
// PostgreSQL, a worker process paused past its lease whose late write is rejected, a poison job
// dead-lettered after N epochs, and `etcdctl lock` excluding an Epoch Mutex on Epoch itself.
#include <signal.h>
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/client/job_effects.h"
#include "epoch/client/job_leases.h"
#include "epoch/client/job_runner.h"
#include "epoch/client/mutex.h"
#include "epoch/client/postgres_fencing.h"
#include "epoch/client/session.h"
#include "epoch/client/sqlite_fencing.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"
#include "jobs_support.h"
#include "postgres_server.h"
#include "test_support.h"

namespace epoch::client {
namespace {

using namespace jobs_test;  // NOLINT(google-build-using-namespace): the suite's fixtures

}  // namespace

TEST_CASE("Jobs on a real cluster with SQLite: two workers, every stage committed once",
          "[jobs][sqlite]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  std::vector<JobSpec> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(Enqueue(*client, "j" + std::to_string(i), {"reserve", "charge", "ship"}));
  }

  // Two workers, each with its own client, session and connection (set up here: Catch2
  // assertions stay on this thread), sweep the queue until it is empty.
  struct Party {
    std::unique_ptr<Client> client;
    std::unique_ptr<Session> session;
    std::unique_ptr<SqliteFile::Connection> db;
    std::unique_ptr<Worker> worker;
  };
  std::vector<Party> parties(2);
  for (Party& p : parties) {
    p.client = NewClient(*cluster);
    p.session = NewSession(p.client.get());
    p.db = std::make_unique<SqliteFile::Connection>(file.path);
    p.worker = std::make_unique<Worker>(p.client.get(), p.db->store.get(), p.db->effects.get());
  }
  auto work = [&](Party* p, std::size_t seed) {
    SessionRef ref(p->session.get());
    int completed = 0;
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    for (int round = 0; round < 200 && std::chrono::steady_clock::now() < deadline; ++round) {
      bool any = false;
      for (std::size_t k = 0; k < jobs.size(); ++k) {
        const JobSpec& job = jobs[(k + seed) % jobs.size()];
        const JobOutcome outcome = p->worker->runner->RunOnce(job, ref).outcome;
        if (outcome == JobOutcome::kCompleted) ++completed;
        if (outcome != JobOutcome::kGone) any = true;
      }
      if (!any) break;
    }
    return completed;
  };
  auto a = std::async(std::launch::async, work, &parties[0], 0);
  auto b = std::async(std::launch::async, work, &parties[1], 3);
  CHECK(a.get() + b.get() == 6);

  CHECK(CountPrefix(*client, kKeys.Jobs()) == 0);
  CHECK(CountPrefix(*client, kKeys.Done()) == 6);
  CHECK(CountPrefix(*client, kKeys.prefix + "lock/") == 0);
  SqliteFile::Connection db(file.path);
  for (const JobSpec& job : jobs) {
    const Effects effects = file.Of(job.id);
    REQUIRE(effects.size() == 3);
    auto record = ParseEpochRecord(Value(*client, kKeys.Epoch(job.id)).value_or(""));
    REQUIRE(record.ok());
    CHECK(record->epoch == 1);  // nobody lost a job: it never changed hands
    for (std::size_t s = 0; s < 3; ++s) {
      CHECK(effects[s].first == static_cast<std::int64_t>(s + 1));
      CHECK(effects[s].second == record->token.value());
    }
    auto row = db.store->ReadJob(job.id);
    REQUIRE(row.ok());
    CHECK(row->state == "done");
    CHECK(row->last_fencing_token == record->token);
    CHECK(Value(*client, kKeys.DoneJob(job.id)) == EncodeEpochRecord(*record));
  }
}

TEST_CASE("Jobs on a real cluster with PostgreSQL: a takeover resumes with a higher token",
          "[jobs][postgres]") {
  testing::PostgresServer postgres;  // throws (the test fails) if PostgreSQL cannot start
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  testing::PgConn conn = postgres.Connect();
  PostgresFencedStore store(conn.get());
  PostgresEffectLog effects(conn.get());
  REQUIRE(store.CreateTable().ok());
  REQUIRE(effects.CreateTable().ok());
  const JobSpec job = Enqueue(*client, "pg1", {"debit", "credit", "notify"});

  // The first holder loses its session (revoked: its lock key goes) during stage 2.
  auto first_session = NewSession(client.get());
  Worker first(client.get(), &store, &effects, 3, [&](const StageContext& ctx) {
    if (ctx.stage == 2) (void)first_session->Close();
    return Status::Ok();
  });
  SessionRef first_ref(first_session.get());
  CHECK(first.runner->RunOnce(job, first_ref).outcome == JobOutcome::kSessionLost);

  auto second_session = NewSession(client.get());
  Worker second(client.get(), &store, &effects);
  SessionRef second_ref(second_session.get());
  CHECK(second.runner->RunOnce(job, second_ref).outcome == JobOutcome::kCompleted);

  auto record = ParseEpochRecord(Value(*client, kKeys.Epoch(job.id)).value_or(""));
  REQUIRE(record.ok());
  CHECK(record->epoch == 2);
  const std::int64_t t1 = first.events.front().token.value();
  const std::int64_t t2 = record->token.value();
  CHECK(t2 > t1);
  PGresult* rows = PQexec(conn.get(), "SELECT stage, token FROM job_effects ORDER BY seq");
  REQUIRE(PQresultStatus(rows) == PGRES_TUPLES_OK);
  Effects got;
  for (int r = 0; r < PQntuples(rows); ++r) {
    got.emplace_back(std::stoll(PQgetvalue(rows, r, 0)), std::stoll(PQgetvalue(rows, r, 1)));
  }
  PQclear(rows);
  CHECK(got == Effects{{1, t1}, {2, t2}, {3, t2}});
  auto row = store.ReadJob(job.id);
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(t2));
  CHECK(row->state == "done");
}

TEST_CASE("A worker process paused past its lease has its late write rejected",
          "[jobs][sqlite][process]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  const JobSpec job = Enqueue(*client, "slow", {"a", "b", "c"});

  // The worker skips its own session checks (--self-fencing=false), as a process that does not
  // notice its pause would: only the database guard can stop it.
  const auto log = file.dir.Sub("worker.log");
  testing::ChildProcess worker(
      {FENCED_WORKER_PATH, "--endpoints", cluster->Endpoints(), "--prefix", kKeys.prefix,
       "--sqlite", file.path.string(), "--worker", "paused", "--ttl-s", "1", "--stage-ms", "1500",
       "--self-fencing", "false", "--max-runtime-s", "60"},
      log);
  auto logged = [&](const std::string& text) {
    return FileTail(log, 100'000).find(text) != std::string::npos;
  };
  REQUIRE(Eventually([&] { return logged("event=commit job=slow stage=1 "); }, seconds(20),
                     kProcessPoll));
  REQUIRE(::kill(worker.pid(), SIGSTOP) == 0);  // now inside stage 2's work

  // Its lease expires on the cluster and the lock key goes with it.
  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("slow") + "/") == 0; },
                     seconds(15), kProcessPoll));
  auto session = NewSession(client.get());
  Worker takeover(client.get(), db.store.get(), db.effects.get());
  SessionRef ref(session.get());
  REQUIRE(takeover.runner->RunOnce(job, ref).outcome == JobOutcome::kCompleted);
  const std::int64_t newer = takeover.events.front().token.value();

  REQUIRE(::kill(worker.pid(), SIGCONT) == 0);
  INFO(FileTail(log));
  REQUIRE(Eventually([&] { return logged("event=rejected job=slow stage=2 "); }, seconds(20),
                     kProcessPoll));
  const Effects effects = file.Of("slow");
  REQUIRE(effects.size() == 3);
  CHECK(effects[0].second < newer);  // stage 1 by the paused worker
  CHECK(effects[1] == std::pair<std::int64_t, std::int64_t>{2, newer});
  CHECK(effects[2] == std::pair<std::int64_t, std::int64_t>{3, newer});
  auto row = db.store->ReadJob("slow");
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(newer));
}

TEST_CASE("The example worker swallows its poison pill by default when paused past its lease",
          "[jobs][sqlite][process]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  const JobSpec job = Enqueue(*client, "slow", {"a", "b", "c"});

  const auto log = file.dir.Sub("worker.log");
  testing::ChildProcess worker(  // no --poison-pill / --self-fencing flag: the defaults
      {FENCED_WORKER_PATH, "--endpoints", cluster->Endpoints(), "--prefix", kKeys.prefix,
       "--sqlite", file.path.string(), "--worker", "pill", "--ttl-s", "1", "--stage-ms", "1500",
       "--max-runtime-s", "60"},
      log);
  auto logged = [&](const std::string& text) {
    return FileTail(log, 100'000).find(text) != std::string::npos;
  };
  REQUIRE(Eventually([&] { return logged("event=commit job=slow stage=1 "); }, seconds(20),
                     kProcessPoll));
  REQUIRE(worker.Pause());
  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("slow") + "/") == 0; },
                     seconds(15), kProcessPoll));
  auto session = NewSession(client.get());
  Worker takeover(client.get(), db.store.get(), db.effects.get());
  SessionRef ref(session.get());
  REQUIRE(takeover.runner->RunOnce(job, ref).outcome == JobOutcome::kCompleted);

  REQUIRE(::kill(worker.pid(), SIGCONT) == 0);
  INFO(FileTail(log));
  REQUIRE(Eventually([&] { return !worker.Running(); }, seconds(20), kProcessPoll));
  CHECK(logged("event=poison_pill worker=pill "));
  CHECK_FALSE(logged("event=commit job=slow stage=2 "));
  CHECK(file.Of("slow").size() == 3);
}

TEST_CASE("A poison job lands in the dead-letter prefix after N epoch changes", "[jobs][sqlite]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  const JobSpec job = Enqueue(*client, "poison", {"one", "two"});
  auto session = NewSession(client.get());
  Worker worker(client.get(), db.store.get(), db.effects.get(), /*max_changes=*/2,
                [](const StageContext& ctx) {
                  return ctx.stage == 2 ? Status::Aborted("always fails") : Status::Ok();
                });
  SessionRef ref(session.get());
  std::vector<JobOutcome> outcomes;
  for (int i = 0; i < 5; ++i) outcomes.push_back(worker.runner->RunOnce(job, ref).outcome);
  CHECK(outcomes == std::vector<JobOutcome>{JobOutcome::kStageFailed, JobOutcome::kStageFailed,
                                            JobOutcome::kStageFailed, JobOutcome::kDeadLettered,
                                            JobOutcome::kGone});
  // Every acquisition had a new, larger token and counted one epoch.
  std::vector<std::int64_t> tokens;
  std::vector<std::int64_t> epochs;
  for (const JobEvent& e : worker.events) {
    if (e.kind == JobEventKind::kAcquired || e.kind == JobEventKind::kDeadLettered) {
      tokens.push_back(e.token.value());
      epochs.push_back(e.epoch);
    }
  }
  CHECK(epochs == std::vector<std::int64_t>{1, 2, 3, 4});
  REQUIRE(tokens.size() == 4);
  for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(tokens[i] > tokens[i - 1]);

  CHECK(Value(*client, kKeys.DlqJob("poison")) == job.payload);
  CHECK_FALSE(Value(*client, kKeys.Job("poison")).has_value());
  CHECK(Value(*client, kKeys.Epoch("poison")) == EncodeEpochRecord({4, FencingToken(tokens[3])}));
  CHECK(CountPrefix(*client, kKeys.LockName("poison") + "/") == 0);
  CHECK(file.Of("poison") == Effects{{1, tokens[0]}});  // stage 1 once, never re-applied
}

TEST_CASE("etcdctl lock on Epoch excludes an Epoch Mutex and the job runner on the same name",
          "[jobs][mutex]") {
  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  TempDir dir("epoch-jobs");
  const JobSpec job = Enqueue(*client, "locked", {"only"});
  testing::EtcdctlLock other(test::kEtcdctlPath, cluster->Endpoints(), kKeys.LockName("locked"),
                             dir.path());
  REQUIRE(Eventually([&] { return other.Holds(); }, seconds(20), kProcessPoll));

  auto session = NewSession(client.get());
  SessionRef ref(session.get());
  SqliteFile file;
  SqliteFile::Connection db(file.path);
  Worker worker(client.get(), db.store.get(), db.effects.get());
  CHECK(worker.runner->RunOnce(job, ref).outcome == JobOutcome::kBusy);

  Mutex mutex(client.get(), *session, kKeys.LockName("locked"));
  auto waiting = std::async(std::launch::async, [&] { return mutex.Lock(); });
  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("locked") + "/") == 2; },
                     seconds(10), kProcessPoll));
  CHECK(waiting.wait_for(milliseconds(0)) == std::future_status::timeout);
  other.Release();
  auto token = waiting.get();
  REQUIRE(token.ok());
  CHECK(token->value() > other.Rev());
  REQUIRE(mutex.Unlock().ok());
  REQUIRE(Eventually([&] { return !other.process->Running(); }, seconds(20), kProcessPoll));

  // Free again: the runner takes the job now.
  CHECK(worker.runner->RunOnce(job, ref).outcome == JobOutcome::kCompleted);

  // The other direction: Epoch holds, etcdctl queues behind it until Unlock.
  auto held = mutex.Lock();
  REQUIRE(held.ok());
  TempDir second_dir("epoch-jobs");
  testing::EtcdctlLock queued(test::kEtcdctlPath, cluster->Endpoints(), kKeys.LockName("locked"),
                              second_dir.path());
  REQUIRE(Eventually([&] { return CountPrefix(*client, kKeys.LockName("locked") + "/") == 2; },
                     seconds(20), kProcessPoll));
  CHECK_FALSE(queued.Holds());
  REQUIRE(mutex.Unlock().ok());
  REQUIRE(Eventually([&] { return queued.Holds(); }, seconds(20), kProcessPoll));
  CHECK(queued.Rev() > held->value());
  queued.Release();
  REQUIRE(Eventually([&] { return !queued.process->Running(); }, seconds(20), kProcessPoll));
}

}  // namespace epoch::client

namespace epoch::client {

TEST_CASE("The example worker rejects bad flags in one line and skips an unparseable job",
          "[jobs][process]") {
  TempDir dir("epoch-jobs");
  const auto log = dir.Sub("worker.log");
  CHECK(testing::RunCommand({FENCED_WORKER_PATH, "--ttl-s", "0"}, log) == 2);
  CHECK(FileTail(log).find("--ttl-s") != std::string::npos);

  auto cluster = StartCluster();
  auto client = NewClient(*cluster);
  REQUIRE(client->Put(kKeys.Job("broken"), "no stages line").ok());
  const auto db = dir.Sub("jobs.db");
  const auto run_log = dir.Sub("run.log");
  CHECK(testing::RunCommand({FENCED_WORKER_PATH, "--endpoints", cluster->Endpoints(), "--prefix",
                             kKeys.prefix, "--sqlite", db, "--max-runtime-s", "30"},
                            run_log) == 0);
  const std::string out = FileTail(run_log);
  INFO(out);
  CHECK(out.find("event=error job=" + kKeys.Job("broken")) != std::string::npos);
  CHECK(out.find("InvalidArgument: job broken: value must start with 'stages=a,b,...'") !=
        std::string::npos);
  CHECK(out.find("event=idle") != std::string::npos);
  CHECK(Value(*client, kKeys.Job("broken")) == "no stages line");  // left for an operator
}

}  // namespace epoch::client
