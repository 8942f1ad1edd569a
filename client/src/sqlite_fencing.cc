#include "epoch/client/sqlite_fencing.h"

#include <fmt/format.h>

#include <cassert>
#include <string>
#include <tuple>

namespace epoch::client {
namespace {

// Owns a prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  [[nodiscard]] bool ok() const { return rc_ == SQLITE_OK; }
  [[nodiscard]] sqlite3_stmt* get() const { return stmt_; }

  void BindText(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int index, std::string_view bytes) {
    sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  }
  void BindInt(int index, std::int64_t value) { sqlite3_bind_int64(stmt_, index, value); }

  [[nodiscard]] std::string ColumnText(int column) const {
    const auto* text = sqlite3_column_text(stmt_, column);
    const int size = sqlite3_column_bytes(stmt_, column);
    return text == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(text), size);
  }
  [[nodiscard]] std::string ColumnBlob(int column) const {
    const void* blob = sqlite3_column_blob(stmt_, column);
    const int size = sqlite3_column_bytes(stmt_, column);
    return blob == nullptr ? std::string() : std::string(static_cast<const char*>(blob), size);
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

// SQLite result codes → Status. Busy/locked is Unavailable (retry later), the rest I/O errors.
Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = fmt::format("sqlite {}: {} ({})", what, sqlite3_errmsg(db), rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Status::Unavailable(msg);
  return Status::IOError(std::move(msg));
}

}  // namespace

Status SqliteFencedStore::Exec(std::string_view sql) {
  char* err = nullptr;
  const std::string owned(sql);
  const int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  sqlite3_free(err);
  return SqliteError(db_, rc, owned.substr(0, owned.find(' ')));
}

Status SqliteFencedStore::CreateTable() { return Exec(kCreateTableSql); }

Status SqliteFencedStore::RegisterJob(std::string_view job_id) {
  Statement stmt(db_, "INSERT INTO job_states (id) VALUES (?1) ON CONFLICT (id) DO NOTHING");
  if (!stmt.ok()) return SqliteError(db_, sqlite3_errcode(db_), "prepare register");
  stmt.BindText(1, job_id);
  const int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_DONE) return SqliteError(db_, rc, "register job");
  return Status::Ok();
}

Status SqliteFencedStore::Begin() { return Exec("BEGIN IMMEDIATE"); }
Status SqliteFencedStore::Commit() { return Exec("COMMIT"); }
Status SqliteFencedStore::Rollback() { return Exec("ROLLBACK"); }

FencedWriteResult SqliteFencedStore::FencedUpdate(const StageWrite& write) {
  assert(write.stage >= 1);
  if (sqlite3_get_autocommit(db_) != 0) {
    return FencedWriteResult::Error(
        Status::FailedPrecondition("the fenced update must run inside the caller's transaction "
                                   "(connection is in autocommit)"));
  }
  Statement stmt(db_, kGuardSql);
  if (!stmt.ok()) {
    return FencedWriteResult::Error(SqliteError(db_, sqlite3_errcode(db_), "prepare guard"));
  }
  stmt.BindInt(1, write.token.value());
  stmt.BindInt(2, write.stage);
  stmt.BindText(3, write.stage_name);
  stmt.BindText(4, write.state);
  stmt.BindBlob(5, write.result);
  stmt.BindText(6, write.job_id);
  const int rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_DONE) return FencedWriteResult::Error(SqliteError(db_, rc, "guarded update"));
  if (sqlite3_changes(db_) == 1) return FencedWriteResult::Applied();

  // No row matched: find out whether the job is unknown or the token is stale.
  Result<JobRow> row = ReadJob(write.job_id);
  if (!row.ok()) return FencedWriteResult::Error(row.status().Annotate("after rejected guard"));
  if (std::tuple(row->last_fencing_token, row->stage) < std::tuple(write.token, write.stage)) {
    // Impossible inside one SQLite write transaction (the database lock is held).
    return FencedWriteResult::Error(Status::Aborted("guard matched no row, yet the row is older"));
  }
  return FencedWriteResult::Stale(ClassifyRejection(write, row->last_fencing_token, row->stage));
}

Result<JobRow> SqliteFencedStore::ReadJob(std::string_view job_id) {
  Statement stmt(db_,
                 "SELECT id, stage, stage_name, last_fencing_token, state, result, updated_at"
                 " FROM job_states WHERE id = ?1");
  if (!stmt.ok()) return SqliteError(db_, sqlite3_errcode(db_), "prepare read");
  stmt.BindText(1, job_id);
  const int rc = sqlite3_step(stmt.get());
  if (rc == SQLITE_DONE) {
    return Status::NotFound(fmt::format("job '{}' is not registered in job_states", job_id));
  }
  if (rc != SQLITE_ROW) return SqliteError(db_, rc, "read job");
  JobRow row;
  row.job_id = stmt.ColumnText(0);
  row.stage = sqlite3_column_int64(stmt.get(), 1);
  row.stage_name = stmt.ColumnText(2);
  row.last_fencing_token = FencingToken(sqlite3_column_int64(stmt.get(), 3));
  row.state = stmt.ColumnText(4);
  row.result = stmt.ColumnBlob(5);
  row.updated_at = stmt.ColumnText(6);
  return row;
}

}  // namespace epoch::client
