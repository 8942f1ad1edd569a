// Cancellation down to the database: a stop request interrupts a SQLite statement in flight
// (sqlite3_interrupt) and cancels a PostgreSQL one (PQcancel). The statements would run for
// minutes; the stop comes from another thread once they run, as the Session's would.
#include "epoch/client/db_cancel.h"

#include <sqlite3.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "epoch/test_support/eventually.h"
#include "postgres_server.h"

namespace epoch::client {
namespace {

using test_support::Eventually;
using test_support::kProcessPoll;

// Counts to 300 million: minutes of work unless interrupted.
constexpr const char* kLongSqlite =
    "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 300000000)"
    " SELECT count(*) FROM c";

// Resolves `started` from SQLite's progress handler once the statement runs.
struct StartSignal {
  explicit StartSignal(sqlite3* db) {
    sqlite3_progress_handler(
        db, 1000,
        [](void* self) {
          auto* signal = static_cast<StartSignal*>(self);
          if (!signal->fired.exchange(true)) signal->started.set_value();
          return 0;
        },
        this);
  }
  std::promise<void> started;
  std::atomic<bool> fired{false};
};

// Another thread: request the stop once the statement has started (bounded wait).
std::thread StopWhenStarted(std::future<void> started, std::stop_source* stop) {
  return std::thread([started = std::move(started), stop]() mutable {
    if (started.wait_for(std::chrono::seconds(60)) == std::future_status::ready) {
      stop->request_stop();
    }
  });
}

int StepCount(sqlite3* db, const char* sql, std::int64_t* count) {
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) == SQLITE_OK);
  const int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) *count = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return rc;
}

}  // namespace

TEST_CASE("A stop request interrupts a SQLite statement in flight", "[client][cancel]") {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
  std::stop_source stop;
  std::int64_t count = -1;
  {
    StartSignal signal(db);
    std::thread stopper = StopWhenStarted(signal.started.get_future(), &stop);
    SqliteInterruptOnStop binding(db, stop.get_token());
    const int rc = StepCount(db, kLongSqlite, &count);
    stopper.join();
    CHECK(rc == SQLITE_INTERRUPT);
    CHECK(count == -1);
    sqlite3_progress_handler(db, 0, nullptr, nullptr);
  }
  // The connection serves the next statement; the stop no longer reaches it.
  CHECK(StepCount(db, "SELECT 41 + 1", &count) == SQLITE_ROW);
  CHECK(count == 42);
  sqlite3_close(db);
}

TEST_CASE("A stop token that is never requested leaves SQLite statements alone",
          "[client][cancel]") {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
  std::stop_source stop;
  SqliteInterruptOnStop binding(db, stop.get_token());
  SqliteInterruptOnStop unstoppable(db, std::stop_token());
  std::int64_t count = -1;
  CHECK(StepCount(db,
                  "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < 10000)"
                  " SELECT count(*) FROM c",
                  &count) == SQLITE_ROW);
  CHECK(count == 10000);
  sqlite3_close(db);
}

TEST_CASE("A stop request cancels a PostgreSQL statement in flight", "[client][cancel][postgres]") {
  testing::PostgresServer server;
  testing::PgConn conn = server.Connect();
  testing::PgConn watcher = server.Connect();
  std::stop_source stop;
  // The stopper waits until the server runs the statement (pg_stat_activity), then stops.
  std::atomic<bool> running{false};
  std::thread stopper([&] {
    running = Eventually(
        [&] {
          PGresult* r = PQexec(watcher.get(),
                               "SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                               " AND query LIKE 'SELECT pg_sleep(120)%'");
          const bool seen =
              PQresultStatus(r) == PGRES_TUPLES_OK && std::string(PQgetvalue(r, 0, 0)) == "1";
          PQclear(r);
          return seen;
        },
        std::chrono::seconds(30), kProcessPoll);
    if (running) stop.request_stop();
  });
  PGresult* result = nullptr;
  {
    PostgresCancelOnStop binding(conn.get(), stop.get_token());
    result = PQexec(conn.get(), "SELECT pg_sleep(120)");
  }
  stopper.join();
  REQUIRE(running);
  CHECK(PQresultStatus(result) == PGRES_FATAL_ERROR);
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  CHECK(std::string(state == nullptr ? "" : state) == "57014");  // query_canceled
  PQclear(result);
  PGresult* next = PQexec(conn.get(), "SELECT 1");
  CHECK(PQresultStatus(next) == PGRES_TUPLES_OK);
  PQclear(next);
}

}  // namespace epoch::client
