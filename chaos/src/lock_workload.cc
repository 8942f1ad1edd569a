#include "epoch/chaos/lock_workload.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <csignal>
#include <map>

#include "epoch/client/sqlite_fencing.h"

namespace epoch::chaos {
namespace {

constexpr const char* kCommitsTable =
    "CREATE TABLE IF NOT EXISTS commits (seq INTEGER PRIMARY KEY AUTOINCREMENT, job TEXT NOT NULL,"
    " stage INTEGER NOT NULL, token INTEGER NOT NULL, worker INTEGER NOT NULL)";
constexpr const char* kStatsTable =
    "CREATE TABLE IF NOT EXISTS worker_stats (worker INTEGER PRIMARY KEY, acquisitions INTEGER,"
    " stale INTEGER)";

std::string DbPath(const std::string& dir) { return dir + "/fenced.db"; }

Status Exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    return Status::IOError(fmt::format("sqlite: {}: {}", sql, msg));
  }
  return Status::Ok();
}

struct Db {
  sqlite3* db = nullptr;
  ~Db() {
    if (db) sqlite3_close(db);
  }
  Status Open(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
      return Status::IOError(fmt::format("cannot open {}", path));
    }
    sqlite3_busy_timeout(db, 10'000);
    return Status::Ok();
  }
};

}  // namespace

LockWorkload::~LockWorkload() { Stop(); }

Status LockWorkload::Start() {
  Db db;
  EPOCH_RETURN_IF_ERROR(db.Open(DbPath(options_.dir)));
  client::SqliteFencedStore store(db.db);
  EPOCH_RETURN_IF_ERROR(store.CreateTable());
  EPOCH_RETURN_IF_ERROR(store.RegisterJob(options_.job));
  EPOCH_RETURN_IF_ERROR(Exec(db.db, kCommitsTable));
  EPOCH_RETURN_IF_ERROR(Exec(db.db, kStatsTable));
  for (int i = 0; i < options_.workers; ++i) {
    auto child = test::ChildProcess::Spawn(
        {options_.self_exe, "--worker", "--worker-id", std::to_string(i + 1), "--endpoints",
         options_.endpoints, "--db", DbPath(options_.dir), "--job", options_.job, "--ttl-s",
         std::to_string(options_.ttl_s)},
        fmt::format("{}/worker{}.log", options_.dir, i + 1));
    if (!child.ok()) return child.status();
    procs_.push_back(std::move(*child));
  }
  return Status::Ok();
}

void LockWorkload::Pause(int i) { procs_.at(static_cast<std::size_t>(i)).Signal(SIGSTOP); }
void LockWorkload::Resume(int i) { procs_.at(static_cast<std::size_t>(i)).Signal(SIGCONT); }

void LockWorkload::Stop() {
  for (auto& p : procs_) {
    p.Signal(SIGCONT);
    p.Signal(SIGTERM);
  }
  for (auto& p : procs_) {
    if (!p.WaitExit(std::chrono::seconds(15))) p.KillAndReap();
  }
  procs_.clear();
}

FencingReport LockWorkload::Check() const {
  FencingReport report;
  Db db;
  Status s = db.Open(DbPath(options_.dir));
  if (!s.ok()) {
    report.violation = s.ToString();
    return report;
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db.db, "SELECT seq, job, stage, token, worker FROM commits ORDER BY seq", -1,
                     &st, nullptr);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> last;  // job -> (stage, token)
  std::map<std::int64_t, std::int64_t> token_owner;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    ++report.commits;
    std::int64_t seq = sqlite3_column_int64(st, 0);
    std::string job = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    std::int64_t stage = sqlite3_column_int64(st, 2);
    std::int64_t token = sqlite3_column_int64(st, 3);
    std::int64_t worker = sqlite3_column_int64(st, 4);
    if (!report.violation.empty()) continue;
    auto [prev_stage, prev_token] = last[job];
    if (stage != prev_stage + 1) {
      report.violation = fmt::format(
          "commit #{}: job {} stage {} by worker {} (token {}) follows stage {}: a stage "
          "committed twice or skipped",
          seq, job, stage, worker, token, prev_stage);
    } else if (token < prev_token) {
      report.violation = fmt::format(
          "commit #{}: job {} stage {} with token {} after a commit with newer token {}", seq, job,
          stage, token, prev_token);
    } else if (auto [it, fresh] = token_owner.emplace(token, worker);
               !fresh && it->second != worker) {
      report.violation = fmt::format(
          "commit #{}: token {} used by worker {} and by worker {}: two holders of one token", seq,
          token, it->second, worker);
    }
    last[job] = {stage, token};
  }
  sqlite3_finalize(st);
  st = nullptr;
  sqlite3_prepare_v2(db.db, "SELECT acquisitions, stale FROM worker_stats", -1, &st, nullptr);
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    report.acquisitions += static_cast<std::uint64_t>(sqlite3_column_int64(st, 0));
    report.stale_rejections += static_cast<std::uint64_t>(sqlite3_column_int64(st, 1));
  }
  sqlite3_finalize(st);
  return report;
}

}  // namespace epoch::chaos
