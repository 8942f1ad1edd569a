#include "epoch/client/postgres_fencing.h"

#include <fmt/format.h>

#include <array>
#include <cassert>
#include <memory>
#include <string>
#include <tuple>

namespace epoch::client {
namespace {

struct PgResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using PgResult = std::unique_ptr<PGresult, PgResultDeleter>;

// A failed command → Status: a broken connection is Unavailable, everything else an I/O error
// carrying PostgreSQL's message and SQLSTATE.
Status PgError(PGconn* conn, const PGresult* result, std::string_view what) {
  if (PQstatus(conn) != CONNECTION_OK) {
    return Status::Unavailable(
        fmt::format("postgres {}: connection lost: {}", what, PQerrorMessage(conn)));
  }
  const char* sqlstate = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  const char* message = result ? PQresultErrorMessage(result) : PQerrorMessage(conn);
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return Status::IOError(
      fmt::format("postgres {}: {} (SQLSTATE {})", what, text, sqlstate ? sqlstate : "?"));
}

// Runs a parameterised command; all parameters are text except those marked binary.
PgResult ExecParams(PGconn* conn, std::string_view sql, int count, const char* const* values,
                    const int* lengths, const int* formats) {
  const std::string owned(sql);
  return PgResult(
      PQexecParams(conn, owned.c_str(), count, nullptr, values, lengths, formats, /*text*/ 0));
}

}  // namespace

Status PostgresFencedStore::Exec(std::string_view sql) {
  const std::string owned(sql);
  PgResult result(PQexec(conn_, owned.c_str()));
  const ExecStatusType status = result ? PQresultStatus(result.get()) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK) {
    return PgError(conn_, result.get(), owned.substr(0, owned.find(' ')));
  }
  return Status::Ok();
}

Status PostgresFencedStore::CreateTable() { return Exec(kCreateTableSql); }

Status PostgresFencedStore::RegisterJob(std::string_view job_id) {
  const std::string id(job_id);
  const std::array<const char*, 1> values = {id.c_str()};
  PgResult result =
      ExecParams(conn_, "INSERT INTO job_states (id) VALUES ($1) ON CONFLICT (id) DO NOTHING", 1,
                 values.data(), nullptr, nullptr);
  if (!result || PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return PgError(conn_, result.get(), "register job");
  }
  return Status::Ok();
}

Status PostgresFencedStore::Begin() { return Exec("BEGIN"); }

Status PostgresFencedStore::Commit() {
  // COMMIT of a transaction that already failed succeeds as a command but reports "ROLLBACK".
  PgResult result(PQexec(conn_, "COMMIT"));
  if (!result || PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return PgError(conn_, result.get(), "COMMIT");
  }
  if (std::string_view(PQcmdStatus(result.get())) == "ROLLBACK") {
    return Status::Aborted("postgres COMMIT: the transaction had failed and was rolled back");
  }
  return Status::Ok();
}

Status PostgresFencedStore::Rollback() { return Exec("ROLLBACK"); }

FencedWriteResult PostgresFencedStore::FencedUpdate(const StageWrite& write) {
  assert(write.stage >= 1);
  if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
    return FencedWriteResult::Error(Status::FailedPrecondition(
        "the fenced update must run inside the caller's open, healthy transaction"));
  }
  const std::string token = std::to_string(write.token.value());
  const std::string stage = std::to_string(write.stage);
  const std::array<const char*, 6> values = {
      token.c_str(),       stage.c_str(),       write.stage_name.c_str(),
      write.state.c_str(), write.result.data(), write.job_id.c_str()};
  const std::array<int, 6> lengths = {0, 0, 0, 0, static_cast<int>(write.result.size()), 0};
  const std::array<int, 6> formats = {0, 0, 0, 0, /*binary bytea*/ 1, 0};
  PgResult result = ExecParams(conn_, kGuardSql, 6, values.data(), lengths.data(), formats.data());
  if (!result || PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return FencedWriteResult::Error(PgError(conn_, result.get(), "guarded update"));
  }
  if (std::string_view(PQcmdTuples(result.get())) == "1") return FencedWriteResult::Applied();

  // No row matched: unknown job, or a stale token. READ COMMITTED reads the latest commit.
  Result<JobRow> row = ReadJob(write.job_id);
  if (!row.ok()) return FencedWriteResult::Error(row.status().Annotate("after rejected guard"));
  if (std::tuple(row->last_fencing_token, row->stage) < std::tuple(write.token, write.stage)) {
    // Only a row rolled back between the UPDATE and this SELECT could look older; say so.
    return FencedWriteResult::Error(Status::Aborted("guard matched no row, yet the row is older"));
  }
  return FencedWriteResult::Stale(ClassifyRejection(write, row->last_fencing_token, row->stage));
}

Result<JobRow> PostgresFencedStore::ReadJob(std::string_view job_id) {
  const std::string id(job_id);
  const std::array<const char*, 1> values = {id.c_str()};
  PgResult result = ExecParams(conn_,
                               "SELECT id, stage, stage_name, last_fencing_token, state,"
                               " result, updated_at::text"
                               " FROM job_states WHERE id = $1",
                               1, values.data(), nullptr, nullptr);
  if (!result || PQresultStatus(result.get()) != PGRES_TUPLES_OK) {
    return PgError(conn_, result.get(), "read job");
  }
  if (PQntuples(result.get()) == 0) {
    return Status::NotFound(fmt::format("job '{}' is not registered in job_states", job_id));
  }
  const PGresult* r = result.get();
  JobRow row;
  row.job_id = PQgetvalue(r, 0, 0);
  row.stage = std::stoll(PQgetvalue(r, 0, 1));
  row.stage_name = PQgetvalue(r, 0, 2);
  row.last_fencing_token = FencingToken(std::stoll(PQgetvalue(r, 0, 3)));
  row.state = PQgetvalue(r, 0, 4);
  if (PQgetisnull(r, 0, 5) == 0) {
    // Text-format bytea (hex, or escape on old servers) → bytes.
    size_t size = 0;
    unsigned char* bytes =
        PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r, 0, 5)), &size);
    if (bytes == nullptr) return Status::IOError("postgres read job: cannot decode result bytea");
    row.result.assign(reinterpret_cast<const char*>(bytes), size);
    PQfreemem(bytes);
  }
  row.updated_at = PQgetvalue(r, 0, 6);
  return row;
}

}  // namespace epoch::client
