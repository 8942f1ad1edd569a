// PostgresFencedStore: the fencing adapter for PostgreSQL over libpq. See fencing.h for the
// contract; PostgreSQL specifics:
//   - the caller owns the PGconn* (and its transaction); FencedUpdate() refuses to run unless the
//     connection is idle inside an open transaction (PQTRANS_INTRANS);
//   - the guarded UPDATE takes the row lock. Under READ COMMITTED a second holder's guard blocks
//     on that lock until the first transaction ends, then re-evaluates its WHERE clause against
//     the committed row — so an older token that raced a newer one is still rejected, and the
//     guard serialises everything the two transactions write after it.
//
// Threading: one thread at a time, like the connection it wraps.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string_view>

#include "epoch/client/db_cancel.h"
#include "epoch/client/fencing.h"

namespace epoch::client {

class PostgresFencedStore final : public FencedStore {
 public:
  static constexpr std::string_view kCreateTableSql =
      "CREATE TABLE IF NOT EXISTS job_states ("
      " id TEXT PRIMARY KEY,"
      " stage BIGINT NOT NULL DEFAULT 0,"
      " stage_name TEXT NOT NULL DEFAULT '',"
      " last_fencing_token BIGINT NOT NULL DEFAULT 0,"
      " state TEXT NOT NULL DEFAULT 'pending',"
      " result BYTEA,"
      " updated_at TIMESTAMPTZ NOT NULL DEFAULT now())";

  // $1 token, $2 stage, $3 stage_name, $4 state, $5 result (binary), $6 job id.
  static constexpr std::string_view kGuardSql =
      "UPDATE job_states SET last_fencing_token = $1, stage = $2, stage_name = $3, state = $4,"
      " result = $5, updated_at = now()"
      " WHERE id = $6"
      " AND (last_fencing_token < $1 OR (last_fencing_token = $1 AND stage < $2))";

  // `conn` must outlive the store.
  explicit PostgresFencedStore(PGconn* conn) : conn_(conn) {}

  Status CreateTable() override;
  Status RegisterJob(std::string_view job_id) override;
  Status Begin() override;
  Status Commit() override;
  Status Rollback() override;
  FencedWriteResult FencedUpdate(const StageWrite& write) override;
  Result<JobRow> ReadJob(std::string_view job_id) override;
  std::unique_ptr<StatementCancel> CancelOnStop(std::stop_token stop) override {
    return std::make_unique<PostgresCancelOnStop>(conn_, std::move(stop));
  }

 private:
  Status Exec(std::string_view sql);

  PGconn* const conn_;
};

}  // namespace epoch::client
