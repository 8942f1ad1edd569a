// epoch_fenced_worker: an example worker. It takes jobs from `<prefix>jobs/` on an Epoch (or etcd)
// cluster and runs each with JobRunner against SQLite (default) or PostgreSQL (--postgres): one
// Session, one Mutex per job, the job's epoch counted at acquisition, every stage a fenced
// transaction recorded under its idempotency key. It logs one line per event on stdout:
//
//   event=commit job=j3 stage=2 name=charge token=41 epoch=1 worker=w1 detail=<idempotency key>
//
// (event = acquired, busy, gone, dead_lettered, commit, already_applied, rejected, session_lost,
// stage_failed, completed, error; plus session_start / idle / exit lines of the worker itself.)
// It exits 0 once the queue is empty, 1 when --max-runtime-s passes first, 2 on bad flags.
//
// A job whose value has a line `poison` fails its last stage every time: it changes hands until
// it is dead-lettered. --self-fencing=false skips the runner's session checks and the poison
// pill, to show that the database guard alone rejects a worker that was paused past its lease.
//
// Poison pill (on by default, --poison-pill): when the session is lost (no acknowledged renewal
// for 70 % of the TTL) the worker logs `event=poison_pill` and SIGKILLs itself before any other
// thread of it can act on the lease; a supervisor (systemd, the demo) starts it again.
#include <fmt/format.h>
#include <libpq-fe.h>
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/job_effects.h"
#include "epoch/client/job_leases.h"
#include "epoch/client/job_runner.h"
#include "epoch/client/postgres_fencing.h"
#include "epoch/client/session.h"
#include "epoch/client/sqlite_fencing.h"

namespace {

using namespace epoch;
using namespace epoch::client;
using std::chrono::milliseconds;

struct Flags {
  std::string endpoints = "127.0.0.1:2379";
  std::string prefix = "epoch-jobs/";
  std::string worker = "w1";
  std::string sqlite = "jobs.db";
  std::string postgres;
  int ttl_s = 2;
  int stage_ms = 200;
  std::int64_t max_epoch_changes = 3;
  bool self_fencing = true;
  bool poison_pill = true;
  int max_runtime_s = 120;
  std::uint64_t seed = 1;
  bool init_db = false;
  epoch::client::TlsOptions tls;  // etcdctl's --cacert, --cert, --key, --insecure-skip-tls-verify
  // etcdctl's --user name[:password] and --password; without a password, the client
  // certificate's CN names the user.
  std::string user;
  std::string password;
};

void Log(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// The database: one connection, its fencing adapter and its effect log.
struct Database {
  sqlite3* sqlite = nullptr;
  PGconn* pg = nullptr;
  std::unique_ptr<FencedStore> store;
  std::unique_ptr<EffectLog> effects;
  ~Database() {
    store.reset();
    effects.reset();
    if (sqlite != nullptr) sqlite3_close(sqlite);
    if (pg != nullptr) PQfinish(pg);
  }
};

Status OpenDatabase(const Flags& flags, Database* db) {
  if (!flags.postgres.empty()) {
    db->pg = PQconnectdb(flags.postgres.c_str());
    if (PQstatus(db->pg) != CONNECTION_OK) {
      return Status::Unavailable(fmt::format("postgres: {}", PQerrorMessage(db->pg)));
    }
    PQsetNoticeProcessor(
        db->pg, [](void*, const char*) {}, nullptr);  // "already exists" chatter
    db->store = std::make_unique<PostgresFencedStore>(db->pg);
    db->effects = std::make_unique<PostgresEffectLog>(db->pg);
    return Status::Ok();
  }
  if (sqlite3_open_v2(flags.sqlite.c_str(), &db->sqlite, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                      nullptr) != SQLITE_OK) {
    return Status::IOError(fmt::format("sqlite open {}: {}", flags.sqlite,
                                       db->sqlite ? sqlite3_errmsg(db->sqlite) : "out of memory"));
  }
  sqlite3_busy_timeout(db->sqlite, 10'000);
  // WAL: readers (the demo's checker) never block the workers' BEGIN IMMEDIATE writers.
  sqlite3_exec(db->sqlite, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
  db->store = std::make_unique<SqliteFencedStore>(db->sqlite);
  db->effects = std::make_unique<SqliteEffectLog>(db->sqlite);
  return Status::Ok();
}

// Waits `d` unless `stop` is requested first; false when stopped.
bool WaitFor(std::chrono::nanoseconds d, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, stop, d, [] { return false; });
  return !stop.stop_requested();
}

// The demo's stage work: `stage_ms` of "work" that the session's loss cancels; a poison job fails
// its last stage every time.
RecordingStageHandler::WorkFn MakeWork(const Flags& flags) {
  return [flags](const StageContext& ctx) -> Result<std::string> {
    if (!WaitFor(milliseconds(flags.stage_ms), ctx.stop)) {
      return Status::Aborted("stage work cancelled: session lost");
    }
    const bool poison = ctx.job->payload.find("\npoison") != std::string::npos;
    if (poison && ctx.stage == static_cast<std::int64_t>(ctx.job->stages.size())) {
      return Status::Aborted(fmt::format("poison job: stage {} always fails", ctx.stage_name));
    }
    return fmt::format("{} done by {} with token {}", ctx.stage_name, flags.worker,
                       ctx.token.value());
  };
}

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// One pass over the queue. Returns false when no runnable job is queued (an unparseable job is
// logged and left for an operator; it does not keep the worker alive).
Result<bool> Sweep(Client& client, const Flags& flags, JobRunner& runner, Session& session,
                   std::mt19937_64& rng) {
  etcdserverpb::RangeRequest range;
  const std::string jobs = JobKeys{flags.prefix}.Jobs();
  range.set_key(jobs);
  range.set_range_end(PrefixRangeEnd(jobs));
  auto listed = client.Range(range, CallOptions{milliseconds(3000), session.stop_token()});
  if (!listed.ok()) return listed.status();
  if (listed->kvs().empty()) return false;
  std::vector<mvccpb::KeyValue> kvs(listed->kvs().begin(), listed->kvs().end());
  std::shuffle(kvs.begin(), kvs.end(), rng);
  SessionRef ref(&session);
  bool runnable = false;
  for (const auto& kv : kvs) {
    if (!session.CanTakeNewWork()) return true;
    auto job = ParseJob(kv.key().substr(jobs.size()), kv.value());
    if (!job.ok()) {
      Log(fmt::format("event=error job={} worker={} detail={}", kv.key(), flags.worker,
                      job.status().ToString()));
      continue;
    }
    runnable = true;
    const JobResult result = runner.RunOnce(*job, ref);
    const auto delay = runner.DelayAfter(result.outcome);
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
  }
  return runnable;
}

int Run(const Flags& flags) {
  Database db;
  if (Status st = OpenDatabase(flags, &db); !st.ok()) {
    Log(fmt::format("event=exit worker={} detail={}", flags.worker, st.ToString()));
    return 1;
  }
  // Idempotent; run --init-db once before starting several PostgreSQL workers, since concurrent
  // CREATE TABLE IF NOT EXISTS can collide in PostgreSQL's catalog.
  Status tables = db.store->CreateTable();
  if (tables.ok()) tables = db.effects->CreateTable();
  if (flags.init_db || !tables.ok()) {
    Log(fmt::format("event=init_db worker={} detail={}", flags.worker, tables.ToString()));
    return tables.ok() ? 0 : 1;
  }
  ClientOptions client_options;
  client_options.endpoints = Split(flags.endpoints, ',');
  client_options.tls = flags.tls;
  client_options.tls.enabled = flags.tls.insecure_skip_verify;
  client_options.user = flags.user;
  client_options.password = flags.password;
  if (const std::size_t colon = flags.user.find(':');
      flags.password.empty() && colon != std::string::npos) {
    client_options.user = flags.user.substr(0, colon);
    client_options.password = flags.user.substr(colon + 1);
  }
  if (client_options.password.empty()) client_options.user.clear();  // certificate auth, if any
  auto client = Client::Create(std::move(client_options));
  if (!client.ok()) {
    Log(fmt::format("event=exit worker={} detail={}", flags.worker, client.status().ToString()));
    return 2;
  }
  EpochJobLeases leases(client->get(), {.keys = JobKeys{flags.prefix},
                                        .max_epoch_changes = flags.max_epoch_changes,
                                        .call_timeout = std::chrono::milliseconds(3000),
                                        .holder = flags.worker});
  RecordingStageHandler handler(db.effects.get(), flags.worker, MakeWork(flags));
  JobRunnerOptions options;
  options.seed = flags.seed;
  options.self_fencing = flags.self_fencing;
  options.on_event = [&](const JobEvent& e) { Log(FormatJobEvent(e, flags.worker)); };
  JobRunner runner(&leases, db.store.get(), &handler, options);

  SessionConfig config;
  config.timing.ttl = std::chrono::seconds(flags.ttl_s);
  config.timing.poison_pill = flags.poison_pill && flags.self_fencing;
  // Runs on the session's thread before anything else learns of the loss.
  config.kill = [worker = flags.worker] {
    Log(fmt::format("event=poison_pill worker={} detail=session lost: killing the process",
                    worker));
    ::kill(::getpid(), SIGKILL);
  };
  std::mt19937_64 rng(flags.seed);
  Backoff retry(BackoffOptions{milliseconds(100), milliseconds(1000), 0}, flags.seed);
  std::unique_ptr<Session> session;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(flags.max_runtime_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (session && session->state() == SessionState::kLost) {
      Log(fmt::format("event=session_end worker={} lease={:x}", flags.worker,
                      session->lease().value()));
      session.reset();
      std::this_thread::sleep_for(runner.DelayAfter(JobOutcome::kSessionLost));
    }
    if (!session) {
      auto created = Session::Create(client->get(), config);
      if (!created.ok()) {
        Log(fmt::format("event=error worker={} detail=session: {}", flags.worker,
                        created.status().ToString()));
        std::this_thread::sleep_for(retry.NextDelay());
        continue;
      }
      session = std::move(*created);
      Log(fmt::format("event=session_start worker={} lease={:x}", flags.worker,
                      session->lease().value()));
    }
    auto more = Sweep(**client, flags, runner, *session, rng);
    if (more.ok() && !*more) {
      Log(fmt::format("event=idle worker={} detail=no runnable job queued", flags.worker));
      return 0;
    }
    // Not empty (others hold the rest) or the listing failed: pause a little, jittered.
    std::this_thread::sleep_for(retry.NextDelay() / (more.ok() ? 4 : 1));
    if (more.ok()) retry.Reset();
  }
  Log(fmt::format("event=exit worker={} detail=max runtime reached", flags.worker));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"epoch_fenced_worker: runs fenced multi-stage jobs from an Epoch job queue"};
  app.add_option("--endpoints", flags.endpoints, "host:port,... of the cluster");
  app.add_option("--prefix", flags.prefix, "job queue prefix (jobs under <prefix>jobs/)");
  app.add_option("--worker", flags.worker, "this worker's name in the logs and the database");
  app.add_option("--sqlite", flags.sqlite, "SQLite database file (default database)");
  app.add_option("--postgres", flags.postgres, "libpq conninfo: use PostgreSQL instead of SQLite");
  app.add_option("--ttl-s", flags.ttl_s, "session lease TTL in seconds")->check(CLI::Range(1, 60));
  app.add_option("--stage-ms", flags.stage_ms, "simulated work per stage")
      ->check(CLI::Range(0, 60'000));
  app.add_option("--max-epoch-changes", flags.max_epoch_changes,
                 "dead-letter a job after this many changes of hands")
      ->check(CLI::Range(1, 1000));
  app.add_option("--self-fencing", flags.self_fencing,
                 "check the session before each stage and commit (false: rely on the DB guard, "
                 "no poison pill)");
  app.add_option("--poison-pill", flags.poison_pill,
                 "SIGKILL this process when its session is lost (70% of the TTL)");
  app.add_option("--max-runtime-s", flags.max_runtime_s, "give up after this long")
      ->check(CLI::Range(1, 3600));
  app.add_option("--seed", flags.seed, "seeds the job order and the backoff jitter");
  app.add_option("--cacert", flags.tls.ca_file, "TLS: verify the cluster with this CA bundle");
  app.add_option("--cert", flags.tls.cert_file, "TLS: client certificate");
  app.add_option("--key", flags.tls.key_file, "TLS: client key");
  app.add_flag("--insecure-skip-tls-verify", flags.tls.insecure_skip_verify,
               "TLS without verifying the cluster's certificates");
  app.add_option("--user", flags.user, "run as this user: name[:password] (etcd auth)");
  app.add_option("--password", flags.password, "the user's password (--user is then the name)");
  app.add_flag("--init-db", flags.init_db, "create the job_states and job_effects tables, exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return Run(flags);
}
