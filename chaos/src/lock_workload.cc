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

constexpr const char* kAcquisitionsTable =
    "CREATE TABLE IF NOT EXISTS acquisitions (seq INTEGER PRIMARY KEY AUTOINCREMENT, worker "
    "INTEGER, lease INTEGER, token INTEGER, key_create_revision INTEGER, header_revision INTEGER,"
    " returned_ns INTEGER, ttl_ms INTEGER, drift_rho REAL, deadline_ns INTEGER, end_ns INTEGER)";

std::string DbPath(const std::string& dir) { return dir + "/fenced.db"; }

// Milliseconds of `ns` after `origin`, for messages.
double Ms(std::int64_t ns, std::int64_t origin) { return static_cast<double>(ns - origin) / 1e6; }

std::string Describe(const Acquisition& a, std::int64_t origin) {
  return fmt::format(
      "worker {} (lease {:x}, token {}): Lock returned at +{:.1f} ms, held until +{:.1f} ms "
      "(Unlock sent +{:.1f}, deadline +{:.1f}; TTL {} ms, rho {})",
      a.worker, a.lease, a.token, Ms(a.returned_ns, origin), Ms(a.HeldUntilNs(), origin),
      Ms(a.end_ns, origin), Ms(a.deadline_ns, origin), a.ttl_ms, a.drift_rho);
}

void SortByReturn(std::vector<Acquisition>& h) {
  std::stable_sort(h.begin(), h.end(), [](const Acquisition& a, const Acquisition& b) {
    return a.returned_ns < b.returned_ns;
  });
}

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

// For each hold that ended at its deadline, the next hold of another lease to start after it.
void ExpiryHandovers(std::vector<Acquisition> history, FencingReport* report) {
  std::erase_if(history, [](const Acquisition& a) { return !a.Held(); });
  SortByReturn(history);
  for (std::size_t i = 0; i < history.size(); ++i) {
    const Acquisition& ended = history[i];
    if (ended.deadline_ns >= ended.end_ns) continue;  // it sent Unlock first
    for (std::size_t j = i + 1; j < history.size(); ++j) {
      if (history[j].lease == ended.lease) continue;
      const double ms = Ms(history[j].returned_ns, ended.HeldUntilNs());
      ++report->expiry_handovers;
      report->min_expiry_handover_ms = std::min(report->min_expiry_handover_ms.value_or(ms), ms);
      break;
    }
  }
}

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
  EPOCH_RETURN_IF_ERROR(Exec(db.db, kAcquisitionsTable));
  for (int i = 0; i < options_.workers; ++i) {
    auto child = test::ChildProcess::Spawn(
        {options_.self_exe, "--worker", "--worker-id", std::to_string(i + 1), "--endpoints",
         options_.endpoints, "--db", DbPath(options_.dir), "--job", options_.job, "--ttl-s",
         std::to_string(options_.ttl_s), "--drift-rho", fmt::format("{}", options_.drift_rho)},
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
    report.violations.push_back({"fencing", s.ToString()});
    return report;
  }
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(db.db, "SELECT seq, job, stage, token, worker FROM commits ORDER BY seq", -1,
                     &st, nullptr);
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> last;  // job -> (stage, token)
  std::map<std::int64_t, std::int64_t> token_owner;
  std::string fencing;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    ++report.commits;
    std::int64_t seq = sqlite3_column_int64(st, 0);
    std::string job = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    std::int64_t stage = sqlite3_column_int64(st, 2);
    std::int64_t token = sqlite3_column_int64(st, 3);
    std::int64_t worker = sqlite3_column_int64(st, 4);
    if (!fencing.empty()) continue;
    auto [prev_stage, prev_token] = last[job];
    if (stage != prev_stage + 1) {
      fencing = fmt::format(
          "commit #{}: job {} stage {} by worker {} (token {}) follows stage {}: a stage "
          "committed twice or skipped",
          seq, job, stage, worker, token, prev_stage);
    } else if (token < prev_token) {
      fencing = fmt::format(
          "commit #{}: job {} stage {} with token {} after a commit with newer token {}", seq, job,
          stage, token, prev_token);
    } else if (auto [it, fresh] = token_owner.emplace(token, worker);
               !fresh && it->second != worker) {
      fencing = fmt::format(
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
  st = nullptr;
  sqlite3_prepare_v2(db.db,
                     "SELECT worker, lease, token, key_create_revision, header_revision, "
                     "returned_ns, ttl_ms, drift_rho, deadline_ns, end_ns FROM acquisitions "
                     "ORDER BY seq",
                     -1, &st, nullptr);
  std::vector<Acquisition> history;
  while (st && sqlite3_step(st) == SQLITE_ROW) {
    Acquisition a;
    a.worker = sqlite3_column_int(st, 0);
    a.lease = sqlite3_column_int64(st, 1);
    a.token = sqlite3_column_int64(st, 2);
    a.key_create_revision = sqlite3_column_int64(st, 3);
    a.header_revision = sqlite3_column_int64(st, 4);
    a.returned_ns = sqlite3_column_int64(st, 5);
    a.ttl_ms = sqlite3_column_int64(st, 6);
    a.drift_rho = sqlite3_column_double(st, 7);
    a.deadline_ns = sqlite3_column_int64(st, 8);
    a.end_ns = sqlite3_column_int64(st, 9);
    history.push_back(a);
    if (a.Held()) ++report.held;
    if (a.key_create_revision > 0) ++report.token_reads;
  }
  sqlite3_finalize(st);
  report.recorded = history.size();
  ExpiryHandovers(history, &report);
  if (!fencing.empty()) report.violations.push_back({"fencing", fencing});
  if (std::string v = CheckLockTokens(history); !v.empty()) {
    report.violations.push_back({"lock-token", v});
  }
  if (std::string v = CheckLockOverlap(std::move(history)); !v.empty()) {
    report.violations.push_back({"lock-overlap", v});
  }
  return report;
}

Status RecordAcquisition(sqlite3* db, const Acquisition& a) {
  return Exec(db,
              fmt::format("INSERT INTO acquisitions (worker, lease, token, key_create_revision, "
                          "header_revision, returned_ns, ttl_ms, drift_rho, deadline_ns, "
                          "end_ns) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
                          a.worker, a.lease, a.token, a.key_create_revision, a.header_revision,
                          a.returned_ns, a.ttl_ms, a.drift_rho, a.deadline_ns, a.end_ns));
}

std::string CheckLockTokens(std::vector<Acquisition> history) {
  SortByReturn(history);
  const std::int64_t origin = history.empty() ? 0 : history.front().returned_ns;
  const Acquisition* previous = nullptr;  // the last non-empty hold
  for (const Acquisition& a : history) {
    if (a.key_create_revision > 0 && a.token != a.key_create_revision) {
      return fmt::format("{}: the token is not the lock key's create_revision {}",
                         Describe(a, origin), a.key_create_revision);
    }
    if (a.header_revision > 0 && a.header_revision < a.token) {
      return fmt::format("{}: the acquiring response's header revision {} is below the token",
                         Describe(a, origin), a.header_revision);
    }
    if (!a.Held()) continue;
    if (previous != nullptr && previous->lease != a.lease && a.token <= previous->token) {
      return fmt::format("{} follows {}: a later holder's token does not grow", Describe(a, origin),
                         Describe(*previous, origin));
    }
    previous = &a;
  }
  return "";
}

std::string CheckLockOverlap(std::vector<Acquisition> history) {
  std::erase_if(history, [](const Acquisition& a) { return !a.Held(); });
  SortByReturn(history);
  const std::int64_t origin = history.empty() ? 0 : history.front().returned_ns;
  for (std::size_t j = 0; j < history.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      const Acquisition& earlier = history[i];
      const Acquisition& later = history[j];
      if (earlier.lease == later.lease || later.returned_ns >= earlier.HeldUntilNs()) continue;
      return fmt::format(
          "{} was granted the lock {:.1f} ms before the end of the hold of {}: two holders "
          "with leases valid on their own clocks",
          Describe(later, origin), Ms(earlier.HeldUntilNs(), later.returned_ns),
          Describe(earlier, origin));
    }
  }
  return "";
}

std::int64_t LeaseGoneByNs(const LeaseObservation& o) {
  return o.status_returned_ns + (o.remaining_ttl_ms + o.max_extension_ms) * 1'000'000;
}

std::optional<NamedViolation> CheckLeaseExpiry(const LeaseObservation& o) {
  const std::int64_t gone_by = LeaseGoneByNs(o);
  if (!o.key_seen || o.read_sent_ns < gone_by) return std::nullopt;
  return NamedViolation{
      "lease-expiry", fmt::format("key {} of lease {:x} (worker {}, paused) still read {:.1f} ms "
                                  "after the lease's deadline "
                                  "plus the published bound (Lease/Status: {} ms left, max "
                                  "extension {} ms; create_revision "
                                  "{})",
                                  o.key, o.lease, o.worker, Ms(o.read_sent_ns, gone_by),
                                  o.remaining_ttl_ms, o.max_extension_ms, o.seen_create_revision)};
}

}  // namespace epoch::chaos
