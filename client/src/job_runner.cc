// JobRunner: the state machine of job_runner.h. Each phase is one function; a phase either ends
// the attempt (returns a JobResult through Finish) or hands over to the next.
#include "epoch/client/job_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace epoch::client {

struct JobRunner::Attempt {
  const JobSpec* job;
  const WorkerSession* session;
  std::optional<JobLease> lease;
  std::int64_t next_stage = 1;
  int committed = 0;
};

std::string_view JobOutcomeName(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kCompleted: return "completed";
    case JobOutcome::kBusy: return "busy";
    case JobOutcome::kGone: return "gone";
    case JobOutcome::kDeadLettered: return "dead_lettered";
    case JobOutcome::kFenced: return "fenced";
    case JobOutcome::kSessionLost: return "session_lost";
    case JobOutcome::kStageFailed: return "stage_failed";
    case JobOutcome::kError: return "error";
  }
  return "unknown";
}

std::string_view JobEventName(JobEventKind kind) {
  switch (kind) {
    case JobEventKind::kAcquired: return "acquired";
    case JobEventKind::kBusy: return "busy";
    case JobEventKind::kGone: return "gone";
    case JobEventKind::kDeadLettered: return "dead_lettered";
    case JobEventKind::kStageCommitted: return "commit";
    case JobEventKind::kStageAlreadyApplied: return "already_applied";
    case JobEventKind::kStageRejected: return "rejected";
    case JobEventKind::kSessionLost: return "session_lost";
    case JobEventKind::kStageFailed: return "stage_failed";
    case JobEventKind::kCompleted: return "completed";
    case JobEventKind::kError: return "error";
  }
  return "unknown";
}

std::string FormatJobEvent(const JobEvent& event, std::string_view worker) {
  std::string detail = event.detail;
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  return fmt::format("event={} job={} stage={} name={} token={} epoch={} worker={} detail={}",
                     JobEventName(event.kind), event.job_id, event.stage,
                     event.stage_name.empty() ? "-" : event.stage_name, event.token.value(),
                     event.epoch, worker, detail.empty() ? "-" : detail);
}

JobRunner::JobRunner(JobLeases* leases, FencedStore* store, StageHandler* handler,
                     JobRunnerOptions options)
    : leases_(leases),
      store_(store),
      handler_(handler),
      options_(std::move(options)),
      backoff_(options_.backoff, options_.seed) {}

JobResult JobRunner::RunOnce(const JobSpec& job, const WorkerSession& session) {
  Attempt a{&job, &session, std::nullopt};
  return Acquire(a);
}

std::chrono::nanoseconds JobRunner::DelayAfter(JobOutcome outcome) {
  switch (outcome) {
    case JobOutcome::kCompleted:
    case JobOutcome::kGone:
    case JobOutcome::kDeadLettered: backoff_.Reset(); return std::chrono::nanoseconds(0);
    case JobOutcome::kBusy: return std::chrono::nanoseconds(0);
    case JobOutcome::kFenced:
    case JobOutcome::kSessionLost:
    case JobOutcome::kStageFailed:
    case JobOutcome::kError: break;
  }
  return backoff_.NextDelay();
}

// --- phases ---------------------------------------------------------------------------------

JobResult JobRunner::Acquire(Attempt& a) {
  auto got = leases_->TryAcquire(*a.job, *a.session);
  if (!got.ok()) {
    if (got.status().Is(StatusCode::kNotFound)) {
      Emit(a, JobEventKind::kGone, 0);
      return Finish(a, JobOutcome::kGone);
    }
    if (a.session->stop_token().stop_requested()) {
      Emit(a, JobEventKind::kSessionLost, 0, got.status().ToString());
      return Finish(a, JobOutcome::kSessionLost);
    }
    Emit(a, JobEventKind::kError, 0, "acquire: " + got.status().ToString());
    return Finish(a, JobOutcome::kError, got.status());
  }
  if (!got->has_value()) {
    Emit(a, JobEventKind::kBusy, 0);
    return Finish(a, JobOutcome::kBusy);
  }
  a.lease = std::move(**got);
  if (a.lease->dead_lettered) {
    // TryAcquire moved the job and unlocked it in the same step; nothing is held any more.
    Emit(a, JobEventKind::kDeadLettered, 0);
    a.lease.reset();
    return Finish(a, JobOutcome::kDeadLettered);
  }
  Emit(a, JobEventKind::kAcquired, 0);
  return Resume(a);
}

JobResult JobRunner::Resume(Attempt& a) {
  if (Status st = store_->RegisterJob(a.job->id); !st.ok()) {
    Emit(a, JobEventKind::kError, 0, "register: " + st.ToString());
    return Finish(a, JobOutcome::kError, st);
  }
  Result<JobRow> row = store_->ReadJob(a.job->id);
  if (!row.ok()) {
    Emit(a, JobEventKind::kError, 0, "read row: " + row.status().ToString());
    return Finish(a, JobOutcome::kError, row.status());
  }
  if (row->last_fencing_token > a.lease->token) {
    Emit(a, JobEventKind::kStageRejected, row->stage + 1,
         fmt::format("row already carries newer token {}", row->last_fencing_token.value()));
    return Finish(a, JobOutcome::kFenced);
  }
  a.next_stage = row->stage + 1;
  return RunStages(a);
}

JobResult JobRunner::RunStages(Attempt& a) {
  const auto stages = static_cast<std::int64_t>(a.job->stages.size());
  for (std::int64_t stage = a.next_stage; stage <= stages; ++stage) {
    if (std::optional<JobResult> end = RunStage(a, stage)) return *end;
  }
  if (Status st = leases_->Complete(*a.lease, *a.session); !st.ok()) {
    Emit(a, JobEventKind::kError, 0, "complete: " + st.ToString());
    return Finish(a, JobOutcome::kError, st);
  }
  Emit(a, JobEventKind::kCompleted, stages);
  return Finish(a, JobOutcome::kCompleted);
}

std::optional<JobResult> JobRunner::RunStage(Attempt& a, std::int64_t stage) {
  StageContext ctx;
  ctx.job = a.job;
  ctx.stage = stage;
  ctx.stage_name = a.job->stages[static_cast<std::size_t>(stage - 1)];
  ctx.token = a.lease->token;
  ctx.epoch = a.lease->epoch;
  ctx.idempotency_key = IdempotencyKey(*a.job, stage);
  if (options_.self_fencing) ctx.stop = a.session->stop_token();

  if (!SessionUsable(a, /*new_work=*/true)) {
    Emit(a, JobEventKind::kSessionLost, stage, "before the stage");
    return Finish(a, JobOutcome::kSessionLost);
  }
  Result<std::string> result = handler_->Work(ctx);
  if (!result.ok()) {
    if (ctx.stop.stop_requested()) {
      Emit(a, JobEventKind::kSessionLost, stage, "during the work");
      return Finish(a, JobOutcome::kSessionLost);
    }
    Emit(a, JobEventKind::kStageFailed, stage, result.status().ToString());
    return Finish(a, JobOutcome::kStageFailed, result.status());
  }
  if (!SessionUsable(a, /*new_work=*/false)) {
    Emit(a, JobEventKind::kSessionLost, stage, "before the commit");
    return Finish(a, JobOutcome::kSessionLost);
  }
  return CommitStage(a, ctx, *result);
}

std::optional<JobResult> JobRunner::CommitStage(Attempt& a, const StageContext& ctx,
                                                const std::string& result) {
  // The session's loss while the transaction runs cancels the statement in flight (a long
  // business write, a lock wait): the worker stops at once instead of when the statement ends.
  const std::unique_ptr<StatementCancel> cancel = store_->CancelOnStop(ctx.stop);
  if (Status st = store_->Begin(); !st.ok()) return CommitFailed(a, ctx, "begin", st);
  StageWrite write{
      a.job->id,
      ctx.stage,
      ctx.stage_name,
      ctx.token,
      ctx.stage == static_cast<std::int64_t>(a.job->stages.size()) ? "done" : "running",
      result};
  FencedWriteResult guard = store_->FencedUpdate(write);
  if (!guard.applied()) {
    (void)store_->Rollback();
    if (guard.stale()) {
      Emit(a, JobEventKind::kStageRejected, ctx.stage, guard.stale_token().ToString());
      return Finish(a, JobOutcome::kFenced);
    }
    return CommitFailed(a, ctx, "guard", guard.status());
  }
  Result<StageEffect> effect = handler_->Apply(ctx, result);
  if (!effect.ok()) {
    (void)store_->Rollback();
    return CommitFailed(a, ctx, "apply", effect.status());
  }
  if (Status st = store_->Commit(); !st.ok()) {
    (void)store_->Rollback();
    return CommitFailed(a, ctx, "commit", st);
  }
  if (*effect == StageEffect::kApplied) {
    ++a.committed;
    Emit(a, JobEventKind::kStageCommitted, ctx.stage, ctx.idempotency_key);
  } else {
    Emit(a, JobEventKind::kStageAlreadyApplied, ctx.stage, ctx.idempotency_key);
  }
  return std::nullopt;
}

JobResult JobRunner::CommitFailed(Attempt& a, const StageContext& ctx, std::string_view what,
                                  const Status& status) {
  if (ctx.stop.stop_requested()) {  // most likely cancelled by the loss, not a database fault
    Emit(a, JobEventKind::kSessionLost, ctx.stage,
         fmt::format("during the commit: {}: {}", what, status.ToString()));
    return Finish(a, JobOutcome::kSessionLost);
  }
  Emit(a, JobEventKind::kError, ctx.stage, fmt::format("{}: {}", what, status.ToString()));
  return Finish(a, JobOutcome::kError, status);
}

JobResult JobRunner::Finish(Attempt& a, JobOutcome outcome, Status error) {
  if (a.lease && outcome != JobOutcome::kCompleted) {
    // Best effort: when it fails (session lost, cluster unreachable) the lease's expiry frees
    // the lock instead.
    (void)leases_->Release(*a.lease, *a.session);
  }
  return JobResult{outcome, a.committed, std::move(error)};
}

bool JobRunner::SessionUsable(const Attempt& a, bool new_work) const {
  if (!options_.self_fencing) return true;
  if (a.session->stop_token().stop_requested()) return false;
  return !new_work || a.session->CanTakeNewWork();
}

void JobRunner::Emit(const Attempt& a, JobEventKind kind, std::int64_t stage, std::string detail) {
  if (!options_.on_event) return;
  JobEvent event{kind, a.job->id, stage, {}, FencingToken(0), 0, std::move(detail)};
  if (stage >= 1 && stage <= static_cast<std::int64_t>(a.job->stages.size())) {
    event.stage_name = a.job->stages[static_cast<std::size_t>(stage - 1)];
  }
  if (a.lease) {
    event.token = a.lease->token;
    event.epoch = a.lease->epoch;
  }
  options_.on_event(event);
}

}  // namespace epoch::client
