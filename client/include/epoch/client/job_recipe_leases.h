// RecipeJobLeases: job leases built from etcd's KV API alone — the job's Mutex, the per-job epoch
// count and dead-letter routing run in the client (docs/architecture.md §9), so a worker can use a
// plain etcd cluster. On Epoch, EpochJobLeases (job_leases.h) asks the server's Jobs service to do
// the same on the same keys; both kinds of worker may serve one queue. Key layout: job.h (JobKeys)
// and client/README.md.
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
#include "epoch/client/job_leases.h"
#include "epoch/client/job_runner.h"

namespace epoch::client {

class RecipeJobLeases final : public JobLeases {
 public:
  // `client` must outlive this object. options.holder is not used (the lock keys stay empty).
  RecipeJobLeases(Client* client, JobLeasesOptions options);

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

}  // namespace epoch::client
