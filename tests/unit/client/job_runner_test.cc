// JobRunner as a state machine, driven with fakes: a fake session, fake job leases (tokens and
// epochs handed out by the test) and a real SQLite database in memory. No clocks, no sleeps.
#include "epoch/client/job_runner.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "epoch/client/job.h"
#include "epoch/client/job_effects.h"
#include "epoch/client/sqlite_fencing.h"

namespace epoch::client {
namespace {

class FakeSession final : public WorkerSession {
 public:
  [[nodiscard]] LeaseId lease() const override { return LeaseId(7); }
  [[nodiscard]] bool CanTakeNewWork() const override { return healthy && !stop.stop_requested(); }
  [[nodiscard]] std::stop_token stop_token() const override { return stop.get_token(); }

  bool healthy = true;
  std::stop_source stop;
};

// Hands out the tokens the test queues (else increasing ones), counts epochs per job and
// dead-letters after max_changes, like EpochJobLeases, and records every call.
class FakeLeases final : public JobLeases {
 public:
  Result<std::optional<JobLease>> TryAcquire(const JobSpec& job, const WorkerSession&) override {
    calls.push_back("acquire " + job.id);
    if (gone.contains(job.id)) return Status::NotFound("gone");
    if (busy) return std::optional<JobLease>();
    std::int64_t token = ++last_token;
    if (!tokens.empty()) {
      token = tokens.front();
      tokens.pop_front();
    }
    const std::int64_t epoch = ++epochs[job.id];
    const bool dead = epoch - 1 > max_changes;
    if (dead) gone.insert(job.id);
    return std::optional<JobLease>(JobLease{job.id, FencingToken(token), epoch, dead, nullptr});
  }
  Status Complete(const JobLease& lease, const WorkerSession&) override {
    calls.push_back("complete " + lease.job_id);
    gone.insert(lease.job_id);
    return Status::Ok();
  }
  Status Release(const JobLease& lease, const WorkerSession&) override {
    calls.push_back("release " + lease.job_id);
    return Status::Ok();
  }

  std::vector<std::string> calls;
  std::deque<std::int64_t> tokens;
  std::int64_t last_token = 100;
  std::map<std::string, std::int64_t> epochs;
  std::set<std::string> gone;
  std::int64_t max_changes = 3;
  bool busy = false;
};

// A SQLite database in memory with both tables, the fakes, and runners over them.
struct Fixture {
  Fixture() : db_handle(Open()), store(db_handle), effects(db_handle) {
    REQUIRE(store.CreateTable().ok());
    REQUIRE(effects.CreateTable().ok());
  }
  ~Fixture() { sqlite3_close(db_handle); }
  static sqlite3* Open() {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
    return db;
  }

  // A runner whose stage work calls `hook(stage)` first (if set) and fails when it returns an
  // error; events go to `events` as "<event> <stage> <token>".
  std::unique_ptr<JobRunner> Runner(std::function<Status(const StageContext&)> hook = {},
                                    bool self_fencing = true, std::string worker = "w") {
    auto handler = std::make_unique<RecordingStageHandler>(
        &effects, worker, [hook](const StageContext& ctx) -> Result<std::string> {
          if (hook) {
            if (Status st = hook(ctx); !st.ok()) return st;
          }
          return "result of " + ctx.stage_name;
        });
    JobRunnerOptions options;
    options.self_fencing = self_fencing;
    options.on_event = [this](const JobEvent& e) {
      events.push_back(fmt::format("{} {} {}", JobEventName(e.kind), e.stage, e.token.value()));
    };
    auto runner = std::make_unique<JobRunner>(&leases, &store, handler.get(), options);
    handlers.push_back(std::move(handler));
    return runner;
  }

  std::vector<std::pair<std::int64_t, std::int64_t>> Effects(const std::string& job) const {
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db_handle,
                       "SELECT stage, token FROM job_effects WHERE job_id = ?1 ORDER BY seq", -1,
                       &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, job.c_str(), -1, SQLITE_TRANSIENT);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      out.emplace_back(sqlite3_column_int64(stmt, 0), sqlite3_column_int64(stmt, 1));
    }
    sqlite3_finalize(stmt);
    return out;
  }

  sqlite3* db_handle;
  SqliteFencedStore store;
  SqliteEffectLog effects;
  FakeLeases leases;
  FakeSession session;
  std::vector<std::unique_ptr<StageHandler>> handlers;
  std::vector<std::string> events;
};

using Effects = std::vector<std::pair<std::int64_t, std::int64_t>>;

JobSpec ThreeStages(std::string id = "j1") {
  auto job = ParseJob(std::move(id), EncodeJob({"reserve", "charge", "ship"}, "amount=10"));
  REQUIRE(job.ok());
  return *job;
}

}  // namespace

TEST_CASE("Job values parse, idempotency keys are stable per job and stage", "[client][jobs]") {
  auto job = ParseJob("a", "stages=x,y\nbody");
  REQUIRE(job.ok());
  CHECK(job->stages == std::vector<std::string>{"x", "y"});
  CHECK(job->payload == "stages=x,y\nbody");
  CHECK(IdempotencyKey(*job, 1) == IdempotencyKey(*job, 1));
  CHECK(IdempotencyKey(*job, 1) != IdempotencyKey(*job, 2));
  CHECK(IdempotencyKey(*job, 1).size() == 16);
  auto other = ParseJob("b", "stages=x,y\nbody");
  CHECK(IdempotencyKey(*job, 1) != IdempotencyKey(*other, 1));
  // Pinned: the Python worker computes the same keys (client/python/tests/test_units.py), so a
  // C++ and a Python holder of one job recognise each other's committed stages.
  auto pinned = ParseJob("j1", "stages=a,b\npayload");
  REQUIRE(pinned.ok());
  CHECK(IdempotencyKey(*pinned, 1) == "b4547f1247bf4e9c");
  CHECK(IdempotencyKey(*pinned, 2) == "b454821247bf53b5");

  CHECK(ParseJob("c", "no stages line").status().Is(StatusCode::kInvalidArgument));
  CHECK(ParseJob("c", "stages=a,,b").status().Is(StatusCode::kInvalidArgument));
  CHECK(ParseJob("c", "stages=").status().Is(StatusCode::kInvalidArgument));
  std::string many = "stages=s";
  for (int i = 0; i < 70; ++i) many += ",s";
  CHECK(ParseJob("c", many).status().Is(StatusCode::kInvalidArgument));

  auto record = ParseEpochRecord(EncodeEpochRecord({3, FencingToken(42)}));
  REQUIRE(record.ok());
  CHECK(record->epoch == 3);
  CHECK(record->token == FencingToken(42));
  CHECK(ParseEpochRecord("epoch=x token=1").status().Is(StatusCode::kCorruption));
  CHECK(ParseEpochRecord("epoch=1").status().Is(StatusCode::kCorruption));
}

TEST_CASE("JobRunner commits every stage in order with one token, then completes",
          "[client][jobs]") {
  Fixture f;
  auto runner = f.Runner();
  const JobSpec job = ThreeStages();
  const JobResult result = runner->RunOnce(job, f.session);
  CHECK(result.outcome == JobOutcome::kCompleted);
  CHECK(result.stages_committed == 3);
  CHECK(f.events == std::vector<std::string>{"acquired 0 101", "commit 1 101", "commit 2 101",
                                             "commit 3 101", "completed 3 101"});
  CHECK(f.Effects("j1") == Effects{{1, 101}, {2, 101}, {3, 101}});
  auto row = f.store.ReadJob("j1");
  REQUIRE(row.ok());
  CHECK(row->stage == 3);
  CHECK(row->state == "done");
  CHECK(row->last_fencing_token == FencingToken(101));
  CHECK(f.leases.calls == std::vector<std::string>{"acquire j1", "complete j1"});
  CHECK(runner->DelayAfter(result.outcome).count() == 0);

  // The job left the queue: the next attempt finds it gone and writes nothing.
  CHECK(runner->RunOnce(job, f.session).outcome == JobOutcome::kGone);
  CHECK(f.Effects("j1").size() == 3);
}

TEST_CASE("JobRunner: a busy job is skipped without touching the database", "[client][jobs]") {
  Fixture f;
  f.leases.busy = true;
  auto runner = f.Runner();
  const JobResult result = runner->RunOnce(ThreeStages(), f.session);
  CHECK(result.outcome == JobOutcome::kBusy);
  CHECK(f.events == std::vector<std::string>{"busy 0 0"});
  CHECK(f.store.ReadJob("j1").status().Is(StatusCode::kNotFound));
  CHECK(runner->DelayAfter(result.outcome).count() == 0);
}

TEST_CASE("JobRunner: losing the session stops before the next stage and the next commit",
          "[client][jobs]") {
  Fixture f;
  SECTION("lost during the work of stage 2: that stage is not committed") {
    auto runner = f.Runner([&](const StageContext& ctx) {
      if (ctx.stage == 2) f.session.stop.request_stop();
      return Status::Ok();
    });
    const JobResult result = runner->RunOnce(ThreeStages(), f.session);
    CHECK(result.outcome == JobOutcome::kSessionLost);
    CHECK(result.stages_committed == 1);
    CHECK(f.Effects("j1") == Effects{{1, 101}});
    CHECK(f.leases.calls.back() == "release j1");
  }
  SECTION("degraded after stage 1: no new stage starts, but nothing is lost") {
    auto runner = f.Runner([&](const StageContext& ctx) {
      if (ctx.stage == 1) f.session.healthy = false;
      return Status::Ok();
    });
    const JobResult result = runner->RunOnce(ThreeStages(), f.session);
    CHECK(result.outcome == JobOutcome::kSessionLost);
    CHECK(f.Effects("j1") == Effects{{1, 101}});
    CHECK(f.events.back() == "session_lost 2 101");
  }
  SECTION("without self-fencing the runner does not look at the session") {
    auto runner = f.Runner(
        [&](const StageContext&) {
          f.session.healthy = false;
          return Status::Ok();
        },
        /*self_fencing=*/false);
    CHECK(runner->RunOnce(ThreeStages(), f.session).outcome == JobOutcome::kCompleted);
  }
}

// Stage 2's business write is a statement that runs for minutes; another thread loses the
// session once it runs (SQLite's progress handler tells when).
class SlowSecondStage final : public StageHandler {
 public:
  SlowSecondStage(sqlite3* db, EffectLog* effects, std::stop_source* lose)
      : db_(db), effects_(effects), lose_(lose) {}

  Result<std::string> Work(const StageContext& ctx) override { return ctx.stage_name; }
  Result<StageEffect> Apply(const StageContext& ctx, const std::string& result) override {
    if (ctx.stage != 2) return effects_->Record(ctx, "w", result);
    Started started;
    sqlite3_progress_handler(db_, 1000, &Started::OnProgress, &started);
    std::thread loser([future = started.promise.get_future(), lose = lose_] {
      if (future.wait_for(std::chrono::seconds(60)) == std::future_status::ready) {
        lose->request_stop();
      }
    });
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db_,
                       "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c"
                       " WHERE n < 300000000) SELECT count(*) FROM c",
                       -1, &stmt, nullptr);
    const int rc = sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    sqlite3_progress_handler(db_, 0, nullptr, nullptr);
    if (!started.fired) started.promise.set_value();  // never ran: let the loser thread end
    loser.join();
    if (rc != SQLITE_ROW) return Status::IOError(fmt::format("business write failed ({})", rc));
    return effects_->Record(ctx, "w", result);
  }

 private:
  struct Started {
    static int OnProgress(void* self) {
      auto* started = static_cast<Started*>(self);
      if (!started->fired) {
        started->fired = true;
        started->promise.set_value();
      }
      return 0;
    }
    std::promise<void> promise;
    bool fired = false;  // the statement's thread only
  };

  sqlite3* const db_;
  EffectLog* const effects_;
  std::stop_source* const lose_;
};

TEST_CASE("JobRunner: losing the session mid-commit interrupts the statement in flight",
          "[client][jobs][cancel]") {
  Fixture f;
  SlowSecondStage handler(f.db_handle, &f.effects, &f.session.stop);
  JobRunnerOptions options;
  options.on_event = [&](const JobEvent& e) {
    f.events.push_back(fmt::format("{} {} {}", JobEventName(e.kind), e.stage, e.token.value()));
  };
  JobRunner runner(&f.leases, &f.store, &handler, options);
  const JobResult result = runner.RunOnce(ThreeStages(), f.session);
  CHECK(result.outcome == JobOutcome::kSessionLost);
  CHECK(f.events.back() == "session_lost 2 101");
  CHECK(f.Effects("j1") == Effects{{1, 101}});  // stage 2 rolled back with its guard
  auto row = f.store.ReadJob("j1");
  REQUIRE(row.ok());
  CHECK(row->stage == 1);
  CHECK(f.leases.calls.back() == "release j1");
}

TEST_CASE("JobRunner: a new holder resumes after the last committed stage", "[client][jobs]") {
  Fixture f;
  auto first = f.Runner([&](const StageContext& ctx) {
    if (ctx.stage == 2) f.session.stop.request_stop();  // holder 101 loses its lease at stage 2
    return Status::Ok();
  });
  const JobSpec job = ThreeStages();
  CHECK(first->RunOnce(job, f.session).outcome == JobOutcome::kSessionLost);

  FakeSession fresh;
  auto second = f.Runner();
  const JobResult result = second->RunOnce(job, fresh);
  CHECK(result.outcome == JobOutcome::kCompleted);
  CHECK(result.stages_committed == 2);
  CHECK(f.Effects("j1") == Effects{{1, 101}, {2, 102}, {3, 102}});
  CHECK(f.leases.epochs["j1"] == 2);
}

TEST_CASE("JobRunner: a paused holder's late commit is rejected by the guard", "[client][jobs]") {
  Fixture f;
  const JobSpec job = ThreeStages();
  FakeSession other;
  auto newer = f.Runner();
  // Holder 101 is "paused" in the work of stage 2 (its process did not notice: no self-fencing);
  // meanwhile holder 102 takes the job over and finishes it.
  auto paused = f.Runner(
      [&](const StageContext& ctx) {
        if (ctx.stage == 2) {
          f.leases.gone.clear();
          CHECK(newer->RunOnce(job, other).outcome == JobOutcome::kCompleted);
        }
        return Status::Ok();
      },
      /*self_fencing=*/false);
  const JobResult result = paused->RunOnce(job, f.session);
  CHECK(result.outcome == JobOutcome::kFenced);
  CHECK(result.stages_committed == 1);
  CHECK(f.Effects("j1") == Effects{{1, 101}, {2, 102}, {3, 102}});
  CHECK(std::find(f.events.begin(), f.events.end(), "rejected 2 101") != f.events.end());
  auto row = f.store.ReadJob("j1");
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(102));
  CHECK(row->stage == 3);
  CHECK(f.leases.calls.back() == "release j1");
  // A fenced holder backs off before trying again.
  CHECK(paused->DelayAfter(result.outcome).count() > 0);
}

TEST_CASE("JobRunner: a stage an older holder committed after the takeover is not applied twice",
          "[client][jobs]") {
  Fixture f;
  const JobSpec job = ThreeStages();
  f.leases.tokens = {101, 102, 101};
  FakeSession a_session;
  // Holder 101 commits stage 1 and loses its session at stage 2.
  auto a = f.Runner([&](const StageContext& ctx) {
    if (ctx.stage == 2) a_session.stop.request_stop();
    return Status::Ok();
  });
  CHECK(a->RunOnce(job, a_session).outcome == JobOutcome::kSessionLost);

  // Holder 102 resumes at stage 2. While it works on stage 2, the old holder 101 (still believing
  // in its token) commits stage 2 and fails at stage 3.
  FakeSession b_session;
  FakeSession late_session;
  auto late = f.Runner(
      [&](const StageContext& ctx) {
        return ctx.stage == 3 ? Status::Aborted("old holder stops here") : Status::Ok();
      },
      /*self_fencing=*/false);
  auto b = f.Runner([&](const StageContext& ctx) {
    if (ctx.stage == 2) {
      f.leases.gone.clear();
      CHECK(late->RunOnce(job, late_session).outcome == JobOutcome::kStageFailed);
    }
    return Status::Ok();
  });
  const JobResult result = b->RunOnce(job, b_session);
  CHECK(result.outcome == JobOutcome::kCompleted);
  // One effect per stage: 102's stage 2 found 101's record and applied nothing.
  CHECK(f.Effects("j1") == Effects{{1, 101}, {2, 101}, {3, 102}});
  CHECK(std::find(f.events.begin(), f.events.end(), "already_applied 2 102") != f.events.end());
}

TEST_CASE("JobRunner: a failing job changes hands until it is dead-lettered", "[client][jobs]") {
  Fixture f;
  f.leases.max_changes = 2;
  auto runner = f.Runner([](const StageContext& ctx) {
    return ctx.stage == 3 ? Status::Aborted("poison") : Status::Ok();
  });
  const JobSpec job = ThreeStages();
  std::vector<JobOutcome> outcomes;
  for (int i = 0; i < 5; ++i) outcomes.push_back(runner->RunOnce(job, f.session).outcome);
  CHECK(outcomes == std::vector<JobOutcome>{JobOutcome::kStageFailed, JobOutcome::kStageFailed,
                                            JobOutcome::kStageFailed, JobOutcome::kDeadLettered,
                                            JobOutcome::kGone});
  // Stages 1 and 2 were committed once (by the first holder), never again.
  CHECK(f.Effects("j1") == Effects{{1, 101}, {2, 101}});
  CHECK(f.events.back() == "gone 0 0");
  CHECK(std::find(f.events.begin(), f.events.end(), "dead_lettered 0 104") != f.events.end());
}

TEST_CASE("JobRunner backs off with jitter after failures and restarts after success",
          "[client][jobs]") {
  Fixture f;
  auto runner = f.Runner();
  // Backoff defaults: base 100 ms, cap 2 s; delay in [0.5, 1.5) x min(cap, base * 2^attempt).
  for (int attempt = 0; attempt < 6; ++attempt) {
    const auto ceiling = std::min<std::int64_t>(2000, 100LL << attempt);
    const auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(
        runner->DelayAfter(JobOutcome::kSessionLost));
    CHECK(delay.count() >= ceiling / 2);
    CHECK(delay.count() < ceiling * 3 / 2);
  }
  CHECK(runner->DelayAfter(JobOutcome::kCompleted).count() == 0);
  const auto first = std::chrono::duration_cast<std::chrono::milliseconds>(
      runner->DelayAfter(JobOutcome::kFenced));
  CHECK(first.count() >= 50);
  CHECK(first.count() < 150);
}

TEST_CASE("JobRunner: database errors are not stale tokens", "[client][jobs]") {
  Fixture f;
  REQUIRE(sqlite3_exec(f.db_handle, "DROP TABLE job_effects", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  auto runner = f.Runner();
  const JobResult result = runner->RunOnce(ThreeStages(), f.session);
  CHECK(result.outcome == JobOutcome::kError);
  CHECK(result.error.Is(StatusCode::kIOError));
  CHECK(result.stages_committed == 0);
  // The guard's update was rolled back with the failed business write.
  auto row = f.store.ReadJob("j1");
  REQUIRE(row.ok());
  CHECK(row->stage == 0);
  CHECK(f.leases.calls.back() == "release j1");
}

}  // namespace epoch::client
