// SqliteFencedStore: the fencing adapter for SQLite, Epoch's embedded default database.
// See fencing.h for the contract; this file only adds SQLite specifics:
//   - the caller owns the sqlite3* connection (and should set a busy timeout on it);
//   - Begin() is BEGIN IMMEDIATE: the write lock is taken up front, so two workers never both
//     read under a shared lock and then fail to upgrade it (SQLITE_BUSY mid-transaction);
//   - FencedUpdate() refuses to run in autocommit mode: the guard and the business writes must
//     commit together.
//
// Threading: one thread at a time, like the connection it wraps.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string_view>

#include "epoch/client/db_cancel.h"
#include "epoch/client/fencing.h"

namespace epoch::client {

class SqliteFencedStore final : public FencedStore {
 public:
  static constexpr std::string_view kCreateTableSql =
      "CREATE TABLE IF NOT EXISTS job_states ("
      " id TEXT PRIMARY KEY NOT NULL,"
      " stage INTEGER NOT NULL DEFAULT 0,"
      " stage_name TEXT NOT NULL DEFAULT '',"
      " last_fencing_token INTEGER NOT NULL DEFAULT 0,"
      " state TEXT NOT NULL DEFAULT 'pending',"
      " result BLOB,"
      " updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))";

  // ?1 token, ?2 stage, ?3 stage_name, ?4 state, ?5 result, ?6 job id.
  static constexpr std::string_view kGuardSql =
      "UPDATE job_states SET last_fencing_token = ?1, stage = ?2, stage_name = ?3, state = ?4,"
      " result = ?5, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
      " WHERE id = ?6"
      " AND (last_fencing_token < ?1 OR (last_fencing_token = ?1 AND stage < ?2))";

  // `db` must outlive the store.
  explicit SqliteFencedStore(sqlite3* db) : db_(db) {}

  Status CreateTable() override;
  Status RegisterJob(std::string_view job_id) override;
  Status Begin() override;
  Status Commit() override;
  Status Rollback() override;
  FencedWriteResult FencedUpdate(const StageWrite& write) override;
  Result<JobRow> ReadJob(std::string_view job_id) override;
  std::unique_ptr<StatementCancel> CancelOnStop(std::stop_token stop) override {
    return std::make_unique<SqliteInterruptOnStop>(db_, std::move(stop));
  }

 private:
  Status Exec(std::string_view sql);

  sqlite3* const db_;
};

}  // namespace epoch::client
