// The SQLite fencing adapter on a real database file, with one connection per worker.
#include "epoch/client/sqlite_fencing.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "epoch/test_support/temp_dir.h"
#include "test_support.h"

namespace epoch::client {
namespace {

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
using Db = std::unique_ptr<sqlite3, SqliteCloser>;

Db Open(const std::filesystem::path& path, int busy_timeout_ms = 5000) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return Db(db);
}

void Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO(sql << " -> " << (err ? err : "ok"));
  sqlite3_free(err);
  REQUIRE(rc == SQLITE_OK);
}

std::int64_t QueryInt(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const std::int64_t value = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return value;
}

StageWrite Write(std::string job, std::int64_t stage, std::int64_t token, std::string state,
                 std::string result) {
  return StageWrite{std::move(job),
                    stage,
                    "stage-" + std::to_string(stage),
                    FencingToken(token),
                    std::move(state),
                    std::move(result)};
}

// A worker: its own connection, its own store.
struct Worker {
  explicit Worker(const std::filesystem::path& path) : db(Open(path)), store(db.get()) {}
  Db db;
  SqliteFencedStore store;
};

// One fenced step: BEGIN IMMEDIATE; guard; business write; COMMIT — or ROLLBACK on rejection.
FencedWriteResult FencedStep(Worker& w, const StageWrite& write) {
  REQUIRE(w.store.Begin().ok());
  FencedWriteResult result = w.store.FencedUpdate(write);
  if (!result.applied()) {
    REQUIRE(w.store.Rollback().ok());
    return result;
  }
  Exec(w.db.get(), "INSERT INTO ledger (job, stage, token, note) VALUES ('" + write.job_id + "', " +
                       std::to_string(write.stage) + ", " + std::to_string(write.token.value()) +
                       ", '" + write.result + "')");
  REQUIRE(w.store.Commit().ok());
  return result;
}

void Setup(const std::filesystem::path& path) {
  Worker admin(path);
  REQUIRE(admin.store.CreateTable().ok());
  REQUIRE(admin.store.CreateTable().ok());  // idempotent
  Exec(admin.db.get(), "CREATE TABLE ledger (job TEXT, stage INTEGER, token INTEGER, note TEXT)");
}

TEST_CASE("SQLite: a paused holder's late commit is rejected and the row keeps the new write",
          "[client][fencing][sqlite]") {
  test_support::TempDir dir("epoch-sqlite-fencing");
  const std::filesystem::path path = dir.Sub("jobs.db");
  Setup(path);
  Worker a(path);
  Worker b(path);
  REQUIRE(a.store.RegisterJob("job-1").ok());

  // Worker A holds token 5 and commits stage 1.
  REQUIRE(FencedStep(a, Write("job-1", 1, 5, "running", "A stage 1")).applied());
  // A pauses (GC, SIGSTOP) past its TTL; the lock goes to B with token 6, which commits stage 2.
  REQUIRE(FencedStep(b, Write("job-1", 2, 6, "running", "B stage 2")).applied());
  // A wakes up and tries to commit stage 2 with its old token.
  const FencedWriteResult late = FencedStep(a, Write("job-1", 2, 5, "running", "A stage 2"));
  REQUIRE(late.stale());
  REQUIRE_FALSE(late.error());
  CHECK(late.stale_token().reason == StaleFencingToken::Reason::kNewerToken);
  CHECK(late.stale_token().attempted_token == FencingToken(5));
  CHECK(late.stale_token().current_token == FencingToken(6));
  CHECK(late.stale_token().current_stage == 2);
  CHECK(late.ToString().find("a newer holder committed") != std::string::npos);

  // The row shows B's write; A's business write was rolled back with its guard.
  const Result<JobRow> row = b.store.ReadJob("job-1");
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(6));
  CHECK(row->stage == 2);
  CHECK(row->result == "B stage 2");
  CHECK(!row->updated_at.empty());
  CHECK(QueryInt(b.db.get(), "SELECT count(*) FROM ledger WHERE note = 'A stage 2'") == 0);
  CHECK(QueryInt(b.db.get(), "SELECT count(*) FROM ledger") == 2);
  // Even A's later stages stay fenced out.
  CHECK(FencedStep(a, Write("job-1", 3, 5, "done", "A stage 3")).stale());
}

TEST_CASE("SQLite: one holder commits its stages in order, never the same stage twice",
          "[client][fencing][sqlite]") {
  test_support::TempDir dir("epoch-sqlite-fencing");
  const std::filesystem::path path = dir.Sub("jobs.db");
  Setup(path);
  Worker w(path);
  REQUIRE(w.store.RegisterJob("job-2").ok());
  REQUIRE(w.store.RegisterJob("job-2").ok());  // idempotent
  for (int stage = 1; stage <= 3; ++stage) {
    REQUIRE(
        FencedStep(w, Write("job-2", stage, 9, "running", "s" + std::to_string(stage))).applied());
  }
  // A retry of stage 2 after an ambiguous commit, or stage 3 replayed, is refused.
  for (int stage : {2, 3}) {
    const FencedWriteResult replay = FencedStep(w, Write("job-2", stage, 9, "running", "again"));
    REQUIRE(replay.stale());
    CHECK(replay.stale_token().reason == StaleFencingToken::Reason::kStageNotAdvanced);
  }
  // A new holder may redo stage 1 (it decides from the row which stage to run next).
  REQUIRE(FencedStep(w, Write("job-2", 1, 10, "running", "new holder")).applied());
  CHECK(QueryInt(w.db.get(), "SELECT count(*) FROM ledger WHERE job = 'job-2'") == 4);
}

TEST_CASE("SQLite: errors are not stale tokens", "[client][fencing][sqlite]") {
  test_support::TempDir dir("epoch-sqlite-fencing");
  const std::filesystem::path path = dir.Sub("jobs.db");
  Setup(path);
  Worker w(path);

  SECTION("outside a transaction the guard refuses to run") {
    REQUIRE(w.store.RegisterJob("job-3").ok());
    const FencedWriteResult r = w.store.FencedUpdate(Write("job-3", 1, 1, "running", ""));
    REQUIRE(r.error());
    CHECK(r.status().code() == StatusCode::kFailedPrecondition);
    CHECK(w.store.ReadJob("job-3")->last_fencing_token == FencingToken(0));
  }
  SECTION("an unregistered job is NotFound") {
    REQUIRE(w.store.Begin().ok());
    const FencedWriteResult r = w.store.FencedUpdate(Write("nope", 1, 1, "running", ""));
    REQUIRE(r.error());
    CHECK(r.status().code() == StatusCode::kNotFound);
    REQUIRE(w.store.Rollback().ok());
    CHECK(w.store.ReadJob("nope").status().code() == StatusCode::kNotFound);
  }
  SECTION("a locked database is Unavailable, a missing table an I/O error") {
    Worker other(path);
    sqlite3_busy_timeout(other.db.get(), 0);
    REQUIRE(w.store.Begin().ok());  // BEGIN IMMEDIATE holds the write lock
    CHECK(other.store.Begin().code() == StatusCode::kUnavailable);
    REQUIRE(w.store.Rollback().ok());
    Exec(w.db.get(), "DROP TABLE job_states");
    REQUIRE(w.store.Begin().ok());
    const FencedWriteResult r = w.store.FencedUpdate(Write("job-3", 1, 1, "running", ""));
    REQUIRE(r.error());
    CHECK(r.status().code() == StatusCode::kIOError);
    REQUIRE(w.store.Rollback().ok());
  }
}

TEST_CASE("SQLite: binary results round-trip", "[client][fencing][sqlite]") {
  test_support::TempDir dir("epoch-sqlite-fencing");
  const std::filesystem::path path = dir.Sub("jobs.db");
  Setup(path);
  Worker w(path);
  REQUIRE(w.store.RegisterJob("job-4").ok());
  const std::string bytes("a\0b\xff\x01", 5);
  REQUIRE(w.store.Begin().ok());
  REQUIRE(w.store.FencedUpdate(Write("job-4", 1, 3, "done", bytes)).applied());
  REQUIRE(w.store.Commit().ok());
  const Result<JobRow> row = w.store.ReadJob("job-4");
  REQUIRE(row.ok());
  CHECK(row->result == bytes);
  CHECK(row->state == "done");
  CHECK(row->stage_name == "stage-1");
}

}  // namespace
}  // namespace epoch::client
