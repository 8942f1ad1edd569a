#include "epoch/client/job_effects.h"

#include <fmt/format.h>

#include <memory>

namespace epoch::client {
namespace {

Status SqliteStatus(sqlite3* db, int rc, std::string_view what) {
  std::string msg = fmt::format("sqlite {}: {} ({})", what, sqlite3_errmsg(db), rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Status::Unavailable(msg);
  return Status::IOError(std::move(msg));
}

struct StmtCloser {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using Stmt = std::unique_ptr<sqlite3_stmt, StmtCloser>;

Result<Stmt> Prepare(sqlite3* db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  Stmt stmt(raw);
  if (rc != SQLITE_OK) return SqliteStatus(db, rc, "prepare");
  return stmt;
}

struct PgResultCloser {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultCloser>;

Status PgStatus(PGconn* conn, const PGresult* result, std::string_view what) {
  if (PQstatus(conn) != CONNECTION_OK) {
    return Status::Unavailable(fmt::format("postgres {}: connection lost", what));
  }
  return Status::IOError(fmt::format("postgres {}: {}", what,
                                     result ? PQresultErrorMessage(result) : PQerrorMessage(conn)));
}

}  // namespace

Status SqliteEffectLog::CreateTable() {
  static constexpr const char* kSql =
      "CREATE TABLE IF NOT EXISTS job_effects ("
      " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
      " idempotency_key TEXT NOT NULL, job_id TEXT NOT NULL, stage INTEGER NOT NULL,"
      " token INTEGER NOT NULL, worker TEXT NOT NULL, result BLOB);"
      "CREATE INDEX IF NOT EXISTS job_effects_key ON job_effects(idempotency_key);";
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, kSql, nullptr, nullptr, &err);
  sqlite3_free(err);
  if (rc != SQLITE_OK) return SqliteStatus(db_, rc, "create job_effects");
  return Status::Ok();
}

Result<StageEffect> SqliteEffectLog::Record(const StageContext& ctx, std::string_view worker,
                                            std::string_view result) {
  if (sqlite3_get_autocommit(db_) != 0) {
    return Status::FailedPrecondition("job_effects: Record must run inside a transaction");
  }
  auto find = Prepare(db_, "SELECT 1 FROM job_effects WHERE idempotency_key = ?1 LIMIT 1");
  if (!find.ok()) return find.status();
  sqlite3_bind_text(find->get(), 1, ctx.idempotency_key.data(),
                    static_cast<int>(ctx.idempotency_key.size()), SQLITE_TRANSIENT);
  int rc = sqlite3_step(find->get());
  if (rc == SQLITE_ROW) return StageEffect::kAlreadyApplied;
  if (rc != SQLITE_DONE) return SqliteStatus(db_, rc, "find effect");

  auto insert = Prepare(db_,
                        "INSERT INTO job_effects (idempotency_key, job_id, stage, token, worker,"
                        " result) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!insert.ok()) return insert.status();
  sqlite3_stmt* s = insert->get();
  sqlite3_bind_text(s, 1, ctx.idempotency_key.data(), static_cast<int>(ctx.idempotency_key.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_text(s, 2, ctx.job->id.data(), static_cast<int>(ctx.job->id.size()),
                    SQLITE_TRANSIENT);
  sqlite3_bind_int64(s, 3, ctx.stage);
  sqlite3_bind_int64(s, 4, ctx.token.value());
  sqlite3_bind_text(s, 5, worker.data(), static_cast<int>(worker.size()), SQLITE_TRANSIENT);
  sqlite3_bind_blob(s, 6, result.data(), static_cast<int>(result.size()), SQLITE_TRANSIENT);
  rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) return SqliteStatus(db_, rc, "insert effect");
  return StageEffect::kApplied;
}

Status PostgresEffectLog::CreateTable() {
  PgResult result(PQexec(conn_,
                         "CREATE TABLE IF NOT EXISTS job_effects ("
                         " seq BIGSERIAL PRIMARY KEY,"
                         " idempotency_key TEXT NOT NULL, job_id TEXT NOT NULL,"
                         " stage BIGINT NOT NULL, token BIGINT NOT NULL, worker TEXT NOT NULL,"
                         " result BYTEA);"
                         "CREATE INDEX IF NOT EXISTS job_effects_key"
                         " ON job_effects(idempotency_key);"));
  if (!result || PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return PgStatus(conn_, result.get(), "create job_effects");
  }
  return Status::Ok();
}

Result<StageEffect> PostgresEffectLog::Record(const StageContext& ctx, std::string_view worker,
                                              std::string_view result) {
  if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
    return Status::FailedPrecondition("job_effects: Record must run inside a transaction");
  }
  const char* key_param[1] = {ctx.idempotency_key.c_str()};
  PgResult found(PQexecParams(conn_, "SELECT 1 FROM job_effects WHERE idempotency_key = $1 LIMIT 1",
                              1, nullptr, key_param, nullptr, nullptr, 0));
  if (!found || PQresultStatus(found.get()) != PGRES_TUPLES_OK) {
    return PgStatus(conn_, found.get(), "find effect");
  }
  if (PQntuples(found.get()) > 0) return StageEffect::kAlreadyApplied;

  const std::string stage = std::to_string(ctx.stage);
  const std::string token = std::to_string(ctx.token.value());
  const std::string worker_text(worker);
  const char* values[6] = {
      ctx.idempotency_key.c_str(), ctx.job->id.c_str(), stage.c_str(), token.c_str(),
      worker_text.c_str(),         result.data()};
  const int lengths[6] = {0, 0, 0, 0, 0, static_cast<int>(result.size())};
  const int formats[6] = {0, 0, 0, 0, 0, 1};
  PgResult inserted(PQexecParams(conn_,
                                 "INSERT INTO job_effects (idempotency_key, job_id, stage, token,"
                                 " worker, result) VALUES ($1, $2, $3, $4, $5, $6)",
                                 6, nullptr, values, lengths, formats, 0));
  if (!inserted || PQresultStatus(inserted.get()) != PGRES_COMMAND_OK) {
    return PgStatus(conn_, inserted.get(), "insert effect");
  }
  return StageEffect::kApplied;
}

}  // namespace epoch::client
