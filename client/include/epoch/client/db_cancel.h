// Cancellation down to the database: while a binding lives, a stop request on its token cancels
// the statement in flight on its connection, so a worker whose session is lost does not sit in a
// long query (or a lock wait) after its lease stopped protecting it.
//
//   SqliteInterruptOnStop   sqlite3_interrupt(db): the running statement fails with
//                           SQLITE_INTERRUPT (an open transaction is rolled back by SQLite when
//                           the statement was a write). A statement started after the stop is
//                           not interrupted: check the token before starting one.
//   PostgresCancelOnStop    PQcancel with the connection's PGcancel: the server cancels the
//                           running statement, which fails with SQLSTATE 57014
//                           (query_canceled); the transaction is then aborted: roll it back.
//
// Both are what FencedStore::CancelOnStop returns (the job runner holds one across a stage's
// commit); a stage's own database work can bind its connection the same way.
//
// Threading: construct and destroy on the thread that uses the connection; the stop request may
// come from any thread (the Session's, for its stop_token). The stop callback runs on the
// requesting thread and only sets a flag (SQLite) or starts a short-lived thread for PQcancel,
// which opens a new connection to the server (PostgreSQL), so the requester is never blocked on
// the network; the destructor waits for that thread.
#pragma once

#include <libpq-fe.h>
#include <sqlite3.h>

#include <functional>
#include <optional>
#include <stop_token>
#include <thread>

#include "epoch/client/fencing.h"

namespace epoch::client {

class SqliteInterruptOnStop final : public StatementCancel {
 public:
  // `db` must outlive the binding.
  SqliteInterruptOnStop(sqlite3* db, std::stop_token stop);

 private:
  std::optional<std::stop_callback<std::function<void()>>> callback_;
};

class PostgresCancelOnStop final : public StatementCancel {
 public:
  // `conn` must outlive the binding.
  PostgresCancelOnStop(PGconn* conn, std::stop_token stop);
  ~PostgresCancelOnStop() override;
  PostgresCancelOnStop(const PostgresCancelOnStop&) = delete;
  PostgresCancelOnStop& operator=(const PostgresCancelOnStop&) = delete;

 private:
  PGcancel* cancel_ = nullptr;  // owned; nullptr when libpq could not make one
  std::thread canceller_;       // started by the stop callback, joined by the destructor
  // Last: destroyed first, so no callback runs while the members above go away.
  std::optional<std::stop_callback<std::function<void()>>> callback_;
};

}  // namespace epoch::client
