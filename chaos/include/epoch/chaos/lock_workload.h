// Lock workload: fenced workers (separate processes, so the harness can SIGSTOP one past its
// lease TTL) contend for one lock with the client library (Session + Mutex) and commit the stages
// of one job to a shared SQLite table through the fencing guard (SqliteFencedStore).
//
// A worker, per acquisition: Lock -> token; then for each of a few stages, while its session is
// healthy: BEGIN IMMEDIATE; read the job row; stage = row.stage + 1; guarded UPDATE with (token,
// stage); if applied, INSERT the commit into `commits(seq, job, stage, token, worker)`; COMMIT
// (else ROLLBACK: the guard fenced it out). Then Unlock.
//
// The fencing check reads `commits` in commit order: per job the stages are 1, 2, 3, ... (no stage
// committed twice, none skipped), tokens never decrease (no older-token commit after a newer
// one), and every token belongs to one worker (two holders never share a token). The first two
// hold whatever the cluster does (each stage is the row's stage + 1 within one transaction; the
// guarded UPDATE admits only a greater (token, stage)).
//
// The lock checks do not rely on the guard. Each worker records every acquisition in
// `acquisitions` (Acquisition below): the token, the lock key's create_revision as a
// linearizable read saw it, the Lock response's header revision, when Lock() returned, and how
// long the worker itself considered the lock held — until it sent Unlock or its session's
// deadline (send time of the last acknowledged renewal + TTL/(1+ρ), docs/timing-and-safety.md §8)
// passed, whichever came first. Times are CLOCK_MONOTONIC (steady_clock), one clock for every
// process on the machine. CheckLockTokens and CheckLockOverlap judge that history;
// CheckLeaseExpiry judges what the pause-worker fault observed of a paused holder's lease.
//
// Threading: LockWorkload is driven from the harness thread (the one that outlives the workers).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/test_support/process.h"

struct sqlite3;

namespace epoch::chaos {

struct LockWorkloadOptions {
  std::string self_exe;   // chaos_runner, started again with --worker
  std::string endpoints;  // comma-separated client endpoints
  std::string dir;        // where the database and the worker logs go
  int workers = 3;
  std::string job = "job-1";
  int ttl_s = 1;
  // The workers' sessions' ρ: it must cover the drift between a worker's clock and the leader's,
  // which the clock-skew fault takes to the cluster's --max-clock-drift (0.05).
  double drift_rho = 0.05;
};

// A checker's finding: the checker's name (as the campaign reports it) and what it saw.
struct NamedViolation {
  std::string checker;
  std::string what;
};

// One acquisition of the lock, as its worker recorded it. Times are CLOCK_MONOTONIC nanoseconds.
struct Acquisition {
  int worker = 0;
  std::int64_t lease = 0;
  std::int64_t token = 0;                // Mutex::Lock()'s fencing token
  std::int64_t key_create_revision = 0;  // of the lock key, read after Lock(); 0 = not seen
  std::int64_t header_revision = 0;      // Mutex::header() of the completing response
  std::int64_t returned_ns = 0;          // Lock() returned
  std::int64_t ttl_ms = 0;               // the session's TTL
  double drift_rho = 0;                  // the session's ρ
  // The session's deadline (last acknowledged renewal's send + TTL/(1+ρ)), the latest value
  // sampled while the lock was held; 0 = it had already passed when Lock() returned.
  std::int64_t deadline_ns = 0;
  std::int64_t end_ns = 0;  // Unlock was about to be sent

  // The worker held the lock, on its own view, over [returned_ns, HeldUntilNs()): until it sent
  // Unlock or its deadline passed. Empty when the deadline passed before Lock() returned.
  [[nodiscard]] std::int64_t HeldUntilNs() const { return std::min(end_ns, deadline_ns); }
  [[nodiscard]] bool Held() const { return HeldUntilNs() > returned_ns; }
};

// Appends `a` to the acquisitions table of the workload's database (the worker, after each
// hold; tests).
[[nodiscard]] Status RecordAcquisition(sqlite3* db, const Acquisition& a);

// `lock-token`: every token equals the lock key's create_revision where the read saw the key, the
// completing response's header revision is at least the token, and ordered by Lock() return
// time, holds that are not empty (Held()) have strictly increasing tokens from one lease to the
// next. "" when the history passes, else the first violation.
[[nodiscard]] std::string CheckLockTokens(std::vector<Acquisition> history);

// `lock-overlap`: no two holds of different leases overlap. For holds i, j with i's Lock()
// returning first, a violation is j's Lock() returning before i's HeldUntilNs(): the cluster had
// granted j the lock (the grant precedes the return) while i, by its own deadline rule and not
// yet unlocking, could still act as the holder. A grant that may lie after i's end is never
// flagged, so the rule never blames a correct cluster. "" when the history passes.
[[nodiscard]] std::string CheckLockOverlap(std::vector<Acquisition> history);

// What the pause-worker fault saw of the paused holder's lease. Times are CLOCK_MONOTONIC ns.
struct LeaseObservation {
  int worker = 0;
  std::int64_t lease = 0;
  std::string key;                      // a key attached to the lease (the lock key)
  std::int64_t status_returned_ns = 0;  // epoch.v1.Lease/Status answered, the key attached
  std::int64_t remaining_ttl_ms = 0;    // its remaining TTL on the cluster clock
  std::int64_t max_extension_ms = 0;    // the published bound (docs/timing-and-safety.md §7)
  std::int64_t read_sent_ns = 0;        // a linearizable read of `key` was sent
  bool key_seen = false;                // ... and returned it, still attached to `lease`
  std::int64_t seen_create_revision = 0;
};

// The instant by which the cluster must have deleted the key: the lease's deadline (the status
// answer plus the remaining TTL) plus the published bound on how far a lease can outlive it.
[[nodiscard]] std::int64_t LeaseGoneByNs(const LeaseObservation& o);

// `lease-expiry`: a read sent at or after LeaseGoneByNs() must not see the key attached to the
// lease (its holder was paused the whole time, so nothing renewed it).
[[nodiscard]] std::optional<NamedViolation> CheckLeaseExpiry(const LeaseObservation& o);

struct FencingReport {
  std::uint64_t commits = 0;
  std::uint64_t stale_rejections = 0;  // guarded writes refused (reported by the workers)
  std::uint64_t acquisitions = 0;
  std::uint64_t recorded = 0;     // acquisitions recorded in the table
  std::uint64_t held = 0;         // ... with a non-empty hold
  std::uint64_t token_reads = 0;  // ... whose lock key the read saw
  // Handovers after a hold that ended at its deadline (a lease that ran out, not an Unlock): how
  // many, and the smallest time from that deadline to the next holder's Lock() return — how close
  // the cluster came to breaking `lock-overlap`.
  std::uint64_t expiry_handovers = 0;
  std::optional<double> min_expiry_handover_ms;
  // At most one each of `fencing`, `lock-token`, `lock-overlap`.
  std::vector<NamedViolation> violations;
};

class LockWorkload {
 public:
  explicit LockWorkload(LockWorkloadOptions options) : options_(std::move(options)) {}
  ~LockWorkload();

  [[nodiscard]] Status Start();
  // SIGSTOP / SIGCONT of worker i.
  void Pause(int i);
  void Resume(int i);
  [[nodiscard]] int workers() const { return static_cast<int>(procs_.size()); }
  [[nodiscard]] const std::string& job() const { return options_.job; }
  // SIGTERM every worker and wait for it to exit (SIGKILL after a bound).
  void Stop();
  [[nodiscard]] FencingReport Check() const;

 private:
  LockWorkloadOptions options_;
  std::vector<test::ChildProcess> procs_;
};

// The key where the worker holding the lock of `job` writes "<id> <lease in hex>" (id 1-based)
// after acquiring it.
[[nodiscard]] inline std::string HolderKey(const std::string& job) { return "/holder/" + job; }

// The worker process (chaos_runner --worker ...). Returns its exit code.
int RunLockWorker(int argc, char** argv);

}  // namespace epoch::chaos
