// The PostgreSQL fencing adapter against a private PostgreSQL server started by the fixture.
#include "epoch/client/postgres_fencing.h"

#include <catch2/catch.hpp>
#include <future>
#include <string>

#include "epoch/test_support/eventually.h"
#include "postgres_server.h"

namespace epoch::client {
namespace {

using test_support::Eventually;
using test_support::kProcessPoll;
using testing::PgConn;
using testing::PostgresServer;

void Exec(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(result);
  INFO(sql << " -> " << PQresultErrorMessage(result));
  PQclear(result);
  REQUIRE((status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK));
}

std::string QueryValue(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  INFO(sql << " -> " << PQresultErrorMessage(result));
  REQUIRE(PQresultStatus(result) == PGRES_TUPLES_OK);
  REQUIRE(PQntuples(result) == 1);
  std::string value = PQgetvalue(result, 0, 0);
  PQclear(result);
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

struct Worker {
  explicit Worker(const PostgresServer& server) : conn(server.Connect()), store(conn.get()) {}
  PgConn conn;
  PostgresFencedStore store;
};

// BEGIN; guard; business write; COMMIT — or ROLLBACK when the guard does not apply.
FencedWriteResult FencedStep(Worker& w, const StageWrite& write) {
  REQUIRE(w.store.Begin().ok());
  FencedWriteResult result = w.store.FencedUpdate(write);
  if (!result.applied()) {
    REQUIRE(w.store.Rollback().ok());
    return result;
  }
  Exec(w.conn.get(), "INSERT INTO ledger (job, stage, token, note) VALUES ('" + write.job_id +
                         "', " + std::to_string(write.stage) + ", " +
                         std::to_string(write.token.value()) + ", '" + write.result + "')");
  REQUIRE(w.store.Commit().ok());
  return result;
}

void Setup(const PostgresServer& server) {
  Worker admin(server);
  REQUIRE(admin.store.CreateTable().ok());
  REQUIRE(admin.store.CreateTable().ok());  // idempotent
  Exec(admin.conn.get(), "CREATE TABLE ledger (job TEXT, stage BIGINT, token BIGINT, note TEXT)");
}

TEST_CASE("PostgreSQL: a paused holder's late commit is rejected and the row keeps the new write",
          "[client][fencing][postgres]") {
  PostgresServer server;
  Setup(server);
  Worker a(server);
  Worker b(server);
  REQUIRE(a.store.RegisterJob("job-1").ok());

  REQUIRE(FencedStep(a, Write("job-1", 1, 5, "running", "A stage 1")).applied());
  // A pauses past its TTL; B acquires the lock with token 6 and commits stage 2.
  REQUIRE(FencedStep(b, Write("job-1", 2, 6, "running", "B stage 2")).applied());
  // A wakes up and commits stage 2 with token 5.
  const FencedWriteResult late = FencedStep(a, Write("job-1", 2, 5, "running", "A stage 2"));
  REQUIRE(late.stale());
  CHECK(late.stale_token().reason == StaleFencingToken::Reason::kNewerToken);
  CHECK(late.stale_token().current_token == FencingToken(6));

  const Result<JobRow> row = b.store.ReadJob("job-1");
  REQUIRE(row.ok());
  CHECK(row->last_fencing_token == FencingToken(6));
  CHECK(row->stage == 2);
  CHECK(row->result == "B stage 2");
  CHECK(QueryValue(b.conn.get(), "SELECT count(*) FROM ledger WHERE note = 'A stage 2'") == "0");
  CHECK(QueryValue(b.conn.get(), "SELECT count(*) FROM ledger") == "2");
}

TEST_CASE("PostgreSQL: a racing older token waits on the row lock, then is rejected",
          "[client][fencing][postgres]") {
  PostgresServer server;
  Setup(server);
  Worker a(server);
  Worker b(server);
  Worker observer(server);
  REQUIRE(a.store.RegisterJob("job-r").ok());
  REQUIRE(FencedStep(a, Write("job-r", 1, 5, "running", "A stage 1")).applied());

  const bool b_commits = GENERATE(true, false);
  CAPTURE(b_commits);
  // B (token 6) applies its guard and holds the row lock, transaction still open.
  REQUIRE(b.store.Begin().ok());
  REQUIRE(b.store.FencedUpdate(Write("job-r", 2, 6, "running", "B stage 2")).applied());

  // A (token 5) runs its guard concurrently; it must block on B's row lock. Catch2's assertions
  // are not thread-safe, so A's thread only records its outcome and the test thread checks it.
  struct AOutcome {
    Status begun;
    FencedWriteResult write = FencedWriteResult::Error(Status::Aborted("not run"));
    Status ended;  // Commit if the write applied, else Rollback
  };
  const std::string a_pid = std::to_string(PQbackendPID(a.conn.get()));
  auto a_result = std::async(std::launch::async, [&] {
    AOutcome out;
    out.begun = a.store.Begin();
    if (!out.begun.ok()) return out;
    out.write = a.store.FencedUpdate(Write("job-r", 2, 5, "running", "A stage 2"));
    out.ended = out.write.applied() ? a.store.Commit() : a.store.Rollback();
    return out;
  });
  const auto a_outcome = [&a_result] {
    AOutcome out = a_result.get();
    REQUIRE(out.begun.ok());
    INFO("A's guarded write: " << out.write.ToString());
    REQUIRE(out.ended.ok());
    return out.write;
  };
  const bool a_waits = Eventually(
      [&] {
        return QueryValue(observer.conn.get(),
                          "SELECT count(*) FROM pg_stat_activity WHERE pid = " + a_pid +
                              " AND wait_event_type = 'Lock'") == "1";
      },
      std::chrono::seconds(20), kProcessPoll);
  REQUIRE(a_waits);

  if (b_commits) {
    REQUIRE(b.store.Commit().ok());
    const FencedWriteResult r = a_outcome();
    REQUIRE(r.stale());  // re-evaluated against B's committed row
    CHECK(r.stale_token().current_token == FencingToken(6));
    CHECK(observer.store.ReadJob("job-r")->result == "B stage 2");
  } else {
    REQUIRE(b.store.Rollback().ok());
    const FencedWriteResult r = a_outcome();
    REQUIRE(r.applied());  // B never committed: A's token is still the newest the row saw
    CHECK(observer.store.ReadJob("job-r")->result == "A stage 2");
  }
}

TEST_CASE("PostgreSQL: stages in order, replays refused, errors are not stale tokens",
          "[client][fencing][postgres]") {
  PostgresServer server;
  Setup(server);
  Worker w(server);
  REQUIRE(w.store.RegisterJob("job-2").ok());
  REQUIRE(w.store.RegisterJob("job-2").ok());
  for (int stage = 1; stage <= 3; ++stage) {
    REQUIRE(
        FencedStep(w, Write("job-2", stage, 9, "running", "s" + std::to_string(stage))).applied());
  }
  const FencedWriteResult replay = FencedStep(w, Write("job-2", 3, 9, "running", "again"));
  REQUIRE(replay.stale());
  CHECK(replay.stale_token().reason == StaleFencingToken::Reason::kStageNotAdvanced);

  // Outside a transaction.
  const FencedWriteResult outside = w.store.FencedUpdate(Write("job-2", 4, 9, "done", ""));
  REQUIRE(outside.error());
  CHECK(outside.status().code() == StatusCode::kFailedPrecondition);

  // Unregistered job.
  REQUIRE(w.store.Begin().ok());
  const FencedWriteResult unknown = w.store.FencedUpdate(Write("nope", 1, 9, "running", ""));
  REQUIRE(unknown.error());
  CHECK(unknown.status().code() == StatusCode::kNotFound);
  REQUIRE(w.store.Rollback().ok());

  // A transaction that already failed: the guard refuses, COMMIT reports the rollback.
  REQUIRE(w.store.Begin().ok());
  PQclear(PQexec(w.conn.get(), "SELECT * FROM no_such_table"));
  const FencedWriteResult in_error = w.store.FencedUpdate(Write("job-2", 4, 9, "done", ""));
  REQUIRE(in_error.error());
  CHECK(in_error.status().code() == StatusCode::kFailedPrecondition);
  CHECK(w.store.Commit().code() == StatusCode::kAborted);

  // The connection dies under the worker: Unavailable, not stale.
  Worker killer(server);
  REQUIRE(w.store.Begin().ok());
  QueryValue(killer.conn.get(), "SELECT pg_terminate_backend(" +
                                    std::to_string(PQbackendPID(w.conn.get())) + ")::text");
  const FencedWriteResult dead = w.store.FencedUpdate(Write("job-2", 4, 9, "done", ""));
  REQUIRE(dead.error());
  CHECK(dead.status().code() == StatusCode::kUnavailable);
  CHECK(killer.store.ReadJob("job-2")->stage == 3);
}

TEST_CASE("PostgreSQL: binary results round-trip", "[client][fencing][postgres]") {
  PostgresServer server;
  Setup(server);
  Worker w(server);
  REQUIRE(w.store.RegisterJob("job-4").ok());
  const std::string bytes("a\0b\xff\x01\\x", 7);
  REQUIRE(w.store.Begin().ok());
  REQUIRE(w.store.FencedUpdate(Write("job-4", 1, 3, "done", bytes)).applied());
  REQUIRE(w.store.Commit().ok());
  const Result<JobRow> row = w.store.ReadJob("job-4");
  REQUIRE(row.ok());
  CHECK(row->result == bytes);
  CHECK(row->state == "done");
  CHECK(!row->updated_at.empty());
}

}  // namespace
}  // namespace epoch::client
