// Fencing adapters: the resource-side half of Epoch's fencing contract
// (docs/timing-and-safety.md §9).
//
// A worker that holds a lock or job lease has a FencingToken (the lock key's create_revision,
// strictly increasing across holders). Every write it makes to the protected database goes
// through a guarded UPDATE of the job's row in `job_states`, executed as the FIRST statement of
// the caller's own transaction; the caller's business writes follow in the same transaction and
// commit or roll back with it:
//
//   UPDATE job_states SET last_fencing_token = :token, stage = :stage, ...
//    WHERE id = :job
//      AND (last_fencing_token < :token OR (last_fencing_token = :token AND stage < :stage))
//
// i.e. (token, stage) must be lexicographically greater than what the row holds. A newer holder
// always wins; the same holder may commit its stages in sequence but never the same stage twice;
// an older holder is rejected forever after a newer one committed. client/README.md explains why
// this variant and not plain `<` or `<=`.
//
// A rejected write is a FencedWriteResult in the `stale` state carrying a StaleFencingToken, never
// a Status: a stale token is the protocol working, an I/O error is the database failing, and the
// caller must tell them apart (roll back and stop, versus roll back and retry).
//
// Who calls it: workers and the job runner, each with its own database connection.
// Threading: a FencedStore wraps one connection and is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <variant>

#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::client {

// One stage commit of one job, guarded by the holder's token.
struct StageWrite {
  std::string job_id;
  std::int64_t stage = 0;  // 1-based position of the stage in the job; 0 = registered, no stage
  std::string stage_name;
  FencingToken token{0};
  std::string state;   // the job's state after this stage, e.g. "running", "done"
  std::string result;  // opaque bytes recorded with the stage
};

// A row of job_states as read back.
struct JobRow {
  std::string job_id;
  std::int64_t stage = 0;
  std::string stage_name;
  FencingToken last_fencing_token{0};
  std::string state;
  std::string result;
  std::string updated_at;  // informational only (database wall clock); never used for safety
};

// The guard refused the write: the row was last written with a newer token, or with the same
// token at the same or a later stage.
struct StaleFencingToken {
  enum class Reason {
    kNewerToken,        // another holder with a higher token committed: this holder is fenced out
    kStageNotAdvanced,  // same holder, stage <= the committed one: a replay or out-of-order stage
  };
  std::string job_id;
  FencingToken attempted_token{0};
  std::int64_t attempted_stage = 0;
  FencingToken current_token{0};
  std::int64_t current_stage = 0;
  Reason reason = Reason::kNewerToken;

  [[nodiscard]] std::string ToString() const;
};

// The outcome of a guarded write: applied, stale (rejected by the guard), or an error.
class [[nodiscard]] FencedWriteResult {
 public:
  static FencedWriteResult Applied() { return FencedWriteResult(AppliedTag{}); }
  static FencedWriteResult Stale(StaleFencingToken stale) {
    return FencedWriteResult(std::move(stale));
  }
  static FencedWriteResult Error(Status status);

  [[nodiscard]] bool applied() const { return std::holds_alternative<AppliedTag>(outcome_); }
  [[nodiscard]] bool stale() const { return std::holds_alternative<StaleFencingToken>(outcome_); }
  [[nodiscard]] bool error() const { return std::holds_alternative<Status>(outcome_); }

  // Valid only when stale() / error() respectively (asserted).
  [[nodiscard]] const StaleFencingToken& stale_token() const;
  [[nodiscard]] const Status& status() const;

  [[nodiscard]] std::string ToString() const;

 private:
  struct AppliedTag {};
  explicit FencedWriteResult(AppliedTag tag) : outcome_(tag) {}
  explicit FencedWriteResult(StaleFencingToken stale) : outcome_(std::move(stale)) {}
  explicit FencedWriteResult(Status status) : outcome_(std::move(status)) {}

  std::variant<AppliedTag, StaleFencingToken, Status> outcome_;
};

// A stop token bound to a connection (db_cancel.h): while this object lives, a stop request
// cancels the statement in flight on it.
class StatementCancel {
 public:
  virtual ~StatementCancel() = default;
};

// The database-neutral interface both adapters implement. Begin/Commit/Rollback are conveniences
// over the wrapped connection; a caller may equally run its own BEGIN/COMMIT on that connection.
class FencedStore {
 public:
  virtual ~FencedStore() = default;

  // CREATE TABLE IF NOT EXISTS job_states (...). Idempotent.
  virtual Status CreateTable() = 0;
  // Inserts the job's row (stage 0, token 0, state "pending") unless it exists. Idempotent. Every
  // real token is >= 1, so a registered row accepts any holder's first stage.
  virtual Status RegisterJob(std::string_view job_id) = 0;

  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual Status Rollback() = 0;

  // The guarded UPDATE. Must run inside an open transaction on this connection (FailedPrecondition
  // otherwise). Applied: the row now holds `write`; go on with the business writes, then commit.
  // Stale or error: roll the transaction back. A job that was never registered is an error
  // (NotFound), not a stale token.
  virtual FencedWriteResult FencedUpdate(const StageWrite& write) = 0;

  // The job's row as committed (or as written earlier in the current transaction).
  virtual Result<JobRow> ReadJob(std::string_view job_id) = 0;

  // While the result lives, a stop request on `stop` cancels the statement in flight on this
  // store's connection (SQLite: sqlite3_interrupt, PostgreSQL: PQcancel): it fails, and the
  // caller rolls back. Nothing happens for a token that can never be stopped.
  [[nodiscard]] virtual std::unique_ptr<StatementCancel> CancelOnStop(std::stop_token stop) = 0;
};

// Classifies a guard that matched no row, from the row's current (token, stage).
StaleFencingToken ClassifyRejection(const StageWrite& write, FencingToken current_token,
                                    std::int64_t current_stage);

}  // namespace epoch::client
