// JobRunner: one multi-stage job as a deterministic state machine (docs/architecture.md §9).
//
//   acquire ──► resume ──► check ──► work ──► commit ──► (next stage: check) ... ──► complete
//      │           │         │         │         │
//      │           │         │         │         └─ guard stale: fenced out (a newer holder)
//      │           │         │         └─ stage work failed (counts toward dead-lettering)
//      │           │         └─ session not healthy / lost: stop, take no new work
//      │           └─ the database row already carries a newer token: fenced out
//      └─ busy (someone holds it) / gone (done or dead-lettered) / dead-lettered by this
//      acquisition
//
// acquire  JobLeases::TryAcquire: the job's Mutex and, atomically with ownership, the epoch count
//          (job_leases.h). After more than max_epoch_changes the job is moved to the dead-letter
//          prefix instead of being run.
// resume   reads the job's row: the next stage is row.stage + 1 (a new holder continues where the
//          last committed stage left off).
// check    before a stage: the session must be healthy (CanTakeNewWork) and not lost.
// work     StageHandler::Work, outside any transaction, bound to the session's stop token.
// commit   the pre-commit check (session not lost), then one database transaction:
//          Begin → FencedStore::FencedUpdate(token, stage) → StageHandler::Apply (business writes
//          keyed by the stage's idempotency key) → Commit, with the session's stop token bound to
//          the connection (FencedStore::CancelOnStop): a loss interrupts the statement in flight. A
//          stage whose idempotency key is already recorded (an earlier holder committed it and then
//          lost the job) is not applied again.
// complete JobLeases::Complete (the job key leaves the queue, guarded on still owning the lock).
//
// Every exit other than completion releases the lock when it can (Release). DelayAfter() gives
// the pause before the next attempt: backoff with full jitter after a lost lease, a fence or a
// failure; none after success.
//
// Events: every transition is reported through on_event (the example worker logs them one per
// line, FormatJobEvent). Determinism: no clocks, no sleeps, no threads in the runner; the order of
// calls into JobLeases, FencedStore and StageHandler depends only on their answers.
//
// Threading: one JobRunner per worker thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "epoch/client/backoff.h"
#include "epoch/client/fencing.h"
#include "epoch/client/job.h"
#include "epoch/status.h"

namespace epoch::client {

// The Epoch side of a job lease (job_leases.h has the real one, tests use fakes).
class JobLeases {
 public:
  virtual ~JobLeases() = default;
  // The job's lock through `session`'s lease, counted in the job's epoch. nullopt: another
  // holder has it. NotFound: the job is no longer queued (done or dead-lettered).
  virtual Result<std::optional<JobLease>> TryAcquire(const JobSpec& job,
                                                     const WorkerSession& session) = 0;
  // Takes the finished job out of the queue (guarded on still owning its lock) and unlocks.
  virtual Status Complete(const JobLease& lease, const WorkerSession& session) = 0;
  // Unlocks without completing.
  virtual Status Release(const JobLease& lease, const WorkerSession& session) = 0;
};

struct StageContext {
  const JobSpec* job = nullptr;
  std::int64_t stage = 0;  // 1-based
  std::string stage_name;
  FencingToken token{0};
  std::int64_t epoch = 0;
  std::string idempotency_key;
  std::stop_token stop;  // the session's (empty when self-fencing is off)
};

enum class StageEffect { kApplied, kAlreadyApplied };

// The job's business logic for one stage.
class StageHandler {
 public:
  virtual ~StageHandler() = default;
  // The stage's work, outside any transaction; returns the result bytes to record. Must honour
  // ctx.stop. An error fails the stage: the job is released and retried later.
  virtual Result<std::string> Work(const StageContext& ctx) = 0;
  // The business writes, inside the open transaction, after the guard applied. kAlreadyApplied
  // when ctx.idempotency_key is already recorded (then nothing is written).
  virtual Result<StageEffect> Apply(const StageContext& ctx, const std::string& result) = 0;
};

enum class JobOutcome {
  kCompleted,     // every stage committed (now or by earlier holders) and the job left the queue
  kBusy,          // another holder has the lock
  kGone,          // not queued any more (completed or dead-lettered by someone)
  kDeadLettered,  // this acquisition exceeded max_epoch_changes: moved to the dead-letter prefix
  kFenced,        // a newer holder committed: the guard rejected this holder
  kSessionLost,   // the session is not healthy (or lost) before a stage or before a commit
  kStageFailed,   // StageHandler::Work failed
  kError,         // Epoch or the database failed (not a stale token)
};
std::string_view JobOutcomeName(JobOutcome outcome);

enum class JobEventKind {
  kAcquired,
  kBusy,
  kGone,
  kDeadLettered,
  kStageCommitted,
  kStageAlreadyApplied,  // the guard applied, the idempotency key was already recorded
  kStageRejected,        // the guard refused: stale token
  kSessionLost,
  kStageFailed,
  kCompleted,
  kError,
};
std::string_view JobEventName(JobEventKind kind);

struct JobEvent {
  JobEventKind kind;
  std::string job_id;
  std::int64_t stage = 0;
  std::string stage_name;
  FencingToken token{0};
  std::int64_t epoch = 0;
  std::string detail;  // idempotency key, stale-token description, error text
};
// One parseable line: "event=commit job=j7 stage=2 name=charge token=812 epoch=1 worker=w2
// detail=..." (detail last: it may contain spaces).
std::string FormatJobEvent(const JobEvent& event, std::string_view worker);

struct JobResult {
  JobOutcome outcome = JobOutcome::kError;
  int stages_committed = 0;  // by this attempt
  Status error;              // for kError / kStageFailed
};

struct JobRunnerOptions {
  // Pause before the next acquisition after a lost lease, a fence or a failure.
  BackoffOptions backoff{std::chrono::milliseconds(100), std::chrono::milliseconds(2000), 0};
  std::uint64_t seed = 0x70b5;
  // Check the session before each stage and each commit. false only to demonstrate that the
  // database guard alone stops a fenced-out worker (the demo's "no self-fencing" worker).
  bool self_fencing = true;
  std::function<void(const JobEvent&)> on_event;
};

class JobRunner {
 public:
  // The collaborators must outlive the runner.
  JobRunner(JobLeases* leases, FencedStore* store, StageHandler* handler, JobRunnerOptions options);

  // One attempt at `job` under `session`.
  JobResult RunOnce(const JobSpec& job, const WorkerSession& session);

  // The pause before the next attempt after `outcome`: zero after completion, gone, dead-letter
  // or busy (and the backoff restarts from its base); otherwise the next jittered backoff delay.
  std::chrono::nanoseconds DelayAfter(JobOutcome outcome);

 private:
  struct Attempt;
  JobResult Acquire(Attempt& a);
  JobResult Resume(Attempt& a);
  JobResult RunStages(Attempt& a);
  // One stage: check, work, commit. nullopt: the stage committed (or was already applied).
  std::optional<JobResult> RunStage(Attempt& a, std::int64_t stage);
  std::optional<JobResult> CommitStage(Attempt& a, const StageContext& ctx,
                                       const std::string& result);
  // A database failure during the commit: session lost when the stop was requested (the
  // statement was cancelled), otherwise an error.
  JobResult CommitFailed(Attempt& a, const StageContext& ctx, std::string_view what,
                         const Status& status);
  JobResult Finish(Attempt& a, JobOutcome outcome, Status error = Status());
  bool SessionUsable(const Attempt& a, bool new_work) const;
  void Emit(const Attempt& a, JobEventKind kind, std::int64_t stage, std::string detail = {});

  JobLeases* const leases_;
  FencedStore* const store_;
  StageHandler* const handler_;
  JobRunnerOptions options_;
  Backoff backoff_;
};

}  // namespace epoch::client
