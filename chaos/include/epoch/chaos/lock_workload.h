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
// one), and every token belongs to one worker (two holders never share a token).
//
// Threading: LockWorkload is driven from the harness thread (the one that outlives the workers).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/test_support/process.h"

namespace epoch::chaos {

struct LockWorkloadOptions {
  std::string self_exe;   // chaos_runner, started again with --worker
  std::string endpoints;  // comma-separated client endpoints
  std::string dir;        // where the database and the worker logs go
  int workers = 3;
  std::string job = "job-1";
  int ttl_s = 1;
};

struct FencingReport {
  std::uint64_t commits = 0;
  std::uint64_t stale_rejections = 0;  // guarded writes refused (reported by the workers)
  std::uint64_t acquisitions = 0;
  std::string violation;
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

// The key where the worker holding the lock of `job` writes its id (1-based) after acquiring it.
[[nodiscard]] inline std::string HolderKey(const std::string& job) { return "/holder/" + job; }

// The worker process (chaos_runner --worker ...). Returns its exit code.
int RunLockWorker(int argc, char** argv);

}  // namespace epoch::chaos
