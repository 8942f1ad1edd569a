// EpochJobLeases: job leases on an Epoch (or etcd) cluster — the job's Mutex, the per-job epoch
// count and dead-letter routing (docs/architecture.md §9). Key layout: job.h
// (JobKeys) and client/README.md.
//
// Acquisition, in two cluster writes:
//   1. Mutex::TryLock on LockName(id) — the unchanged etcd recipe, so `etcdctl lock` and Go
//      clientv3 workers exclude an Epoch worker on the same name. Token = the own lock key's
//      create_revision.
//   2. One Txn, guarded on owning the lock:
//        if   CREATE(own lock key) == token         -- still the holder (clientv3 IsOwner)
//         and MOD(epoch key) == mod read before      -- nobody counted in between
//         and CREATE(job key) > 0                    -- still queued
//        then Put(epoch key, {epoch + 1, token})
//             [+ Put(dlq key, job value), Delete(job key)   when epoch - 1 > max_epoch_changes]
//      Why this is atomic with the acquisition: Raft applies the Txn as one entry at one revision,
//      and the first compare holds exactly while this holder owns the lock — after TryLock
//      succeeded no key with a lower create_revision can appear under the lock name again
//      (revisions only grow), so "own key exists with create_revision == token" is "owns the
//      lock". No other holder can own it at that revision, so no count is lost or doubled; a holder
//      that dies between steps 1 and 2 has done no work and is not counted. The record keeps the
//      counted token, so a retried step 2 (after an unknown outcome) counts once.
//      Why not "lock key create + epoch update in one Txn": with the etcd recipe creating the
//      queue key does not mean owning the lock (it may queue), and changing the recipe's Txn
//      would break interoperability with etcdctl/clientv3 lock holders.
//
// Completion: Txn{ CREATE(own lock key) == token, CREATE(job key) > 0 } → Delete(job key),
// Put(done key, epoch record); then Unlock. Not owning any more is not an error for the queue:
// the next holder finds every stage committed in the database and completes the job.
//
// Threading: thread-safe (the Client is); one TryAcquire per job and session at a time.
#pragma once

#include <chrono>
#include <cstdint>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/client/job_runner.h"
#include "epoch/client/session.h"

namespace epoch::client {

struct JobLeasesOptions {
  JobKeys keys{"epoch-jobs/"};
  // A job acquired by more than 1 + max_epoch_changes holders is dead-lettered.
  std::int64_t max_epoch_changes = 3;
  // Deadline of each cluster call (the session's stop token cancels it earlier).
  std::chrono::milliseconds call_timeout{3000};
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
  // Step 2. NotFound: the job left the queue; Aborted: the lock was lost.
  Result<JobLease> CountEpoch(const JobSpec& job, std::shared_ptr<Mutex> lock,
                              const CallOptions& call);
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
