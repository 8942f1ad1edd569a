// EpochJobLeases: job leases from Epoch's Jobs service (epoch.v1.Jobs, server/api/README.md). The
// server takes the job's lock on the worker's lease, counts the epoch change and dead-letters the
// job past the limit in one linearizable step, and returns the fencing token (the lock key's
// create_revision); this class only translates. What stays with the worker — keeping the lease
// alive, degrading at 1/3 of the TTL, self-fencing at 70 %, the stop token, backoff with full
// jitter — is Session's and JobRunner's.
//
//   TryAcquire → Jobs.Acquire{prefix, job, lease, holder, max_epochs}: acquired → the lease;
//                not acquired → nullopt (busy, or the holder's lease ended meanwhile);
//                dead_lettered → a lease marked dead-lettered (the server already released it);
//                NOT_FOUND → NotFound (the job left the queue). Retried like a read: a repeated
//                Acquire by the same lease answers the same token without counting again.
//   Complete   → Jobs.Release{token, completed: true}. Not released: Jobs.Status — out of the
//                queue already (a later holder completed it) is fine, still queued is Aborted (lost
//                the lock). After an unknown outcome, Jobs.Status tells whether it completed.
//   Release    → Jobs.Release{token, completed: false}; not being the holder any more is fine.
//
// On a plain etcd cluster use RecipeJobLeases (job_recipe_leases.h): the same protocol on the KV
// API, on the same keys.
//
// Threading: thread-safe (the Client is); one TryAcquire per job and session at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/client/job_runner.h"
#include "epoch/client/session.h"
#include "epoch/v1/epoch.pb.h"

namespace epoch::client {

struct JobLeasesOptions {
  JobKeys keys{"epoch-jobs/"};
  // A job acquired by more than 1 + max_epoch_changes holders is dead-lettered (>= 1; the
  // server's --job-max-epoch-changes applies to workers that send 0).
  std::int64_t max_epoch_changes = 3;
  // Deadline of each cluster call (the session's stop token cancels it earlier).
  std::chrono::milliseconds call_timeout{3000};
  // The worker's name, stored in the lock key for operators (Jobs.Status's holder).
  std::string holder;
};

class EpochJobLeases final : public JobLeases {
 public:
  // `client` must outlive this object.
  EpochJobLeases(Client* client, JobLeasesOptions options);

  Result<std::optional<JobLease>> TryAcquire(const JobSpec& job,
                                             const WorkerSession& session) override;
  Status Complete(const JobLease& lease, const WorkerSession& session) override;
  Status Release(const JobLease& lease, const WorkerSession& session) override;

  [[nodiscard]] const JobLeasesOptions& options() const { return options_; }

 private:
  // Jobs.Release; `released` tells whether the token was the holder's.
  Status CallRelease(const JobLease& lease, bool completed, const CallOptions& call,
                     bool* released);
  Result<v1::JobStatusResponse> JobStatus(const std::string& job_id, const CallOptions& call);
  CallOptions Call(const WorkerSession& session) const;

  Client* const client_;
  const JobLeasesOptions options_;
};

// Adapts a Session to the runner's WorkerSession.
class SessionRef final : public WorkerSession {
 public:
  explicit SessionRef(const Session* session) : session_(session) {}
  [[nodiscard]] LeaseId lease() const override { return session_->lease(); }
  [[nodiscard]] bool CanTakeNewWork() const override { return session_->CanTakeNewWork(); }
  [[nodiscard]] std::stop_token stop_token() const override { return session_->stop_token(); }

 private:
  const Session* session_;
};

}  // namespace epoch::client
