// Effect logs: the business write of a stage, recorded under the stage's idempotency key, inside
// the transaction whose first statement was the fencing guard (fencing.h).
//
// Table job_effects(seq, idempotency_key, job_id, stage, token, worker, result): one row per
// applied stage, `seq` in commit order. Record() first looks the key up: present means an earlier
// holder already applied this stage (and then lost the job before moving on), so nothing is
// written again (kAlreadyApplied). Because the guard ran first in the same transaction, the
// lookup is serialised with every other holder's write of the job: SQLite's BEGIN IMMEDIATE holds
// the database write lock; in PostgreSQL the guard holds the job row's lock and, under READ
// COMMITTED, the lookup (a new statement) sees every transaction that held it before.
//
// idempotency_key is indexed but deliberately NOT unique: the demo's checker reads the table to
// find double commits independently of this code, which it could not if the schema hid them.
//
// Threading: one thread at a time, like the connection each wraps.
#pragma once

#include <libpq-fe.h>
#include <sqlite3.h>

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "epoch/client/job_runner.h"
#include "epoch/status.h"

namespace epoch::client {

class EffectLog {
 public:
  virtual ~EffectLog() = default;
  // CREATE TABLE / INDEX IF NOT EXISTS. Idempotent.
  virtual Status CreateTable() = 0;
  // Inside the caller's open transaction.
  virtual Result<StageEffect> Record(const StageContext& ctx, std::string_view worker,
                                     std::string_view result) = 0;
};

class SqliteEffectLog final : public EffectLog {
 public:
  explicit SqliteEffectLog(sqlite3* db) : db_(db) {}
  Status CreateTable() override;
  Result<StageEffect> Record(const StageContext& ctx, std::string_view worker,
                             std::string_view result) override;

 private:
  sqlite3* const db_;
};

class PostgresEffectLog final : public EffectLog {
 public:
  explicit PostgresEffectLog(PGconn* conn) : conn_(conn) {}
  Status CreateTable() override;
  Result<StageEffect> Record(const StageContext& ctx, std::string_view worker,
                             std::string_view result) override;

 private:
  PGconn* const conn_;
};

}  // namespace epoch::client

namespace epoch::client {

// A StageHandler whose Work is a caller-supplied function and whose Apply records the stage in an
// EffectLog under its idempotency key.
class RecordingStageHandler final : public StageHandler {
 public:
  using WorkFn = std::function<Result<std::string>(const StageContext&)>;
  // `log` must outlive the handler.
  RecordingStageHandler(EffectLog* log, std::string worker, WorkFn work)
      : log_(log), worker_(std::move(worker)), work_(std::move(work)) {}

  Result<std::string> Work(const StageContext& ctx) override { return work_(ctx); }
  Result<StageEffect> Apply(const StageContext& ctx, const std::string& result) override {
    return log_->Record(ctx, worker_, result);
  }

 private:
  EffectLog* const log_;
  const std::string worker_;
  const WorkFn work_;
};

}  // namespace epoch::client
