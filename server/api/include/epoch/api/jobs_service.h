// JobsService: epoch.v1.Jobs, fenced job leases on the client runner's key layout (src/
// job_layout.h, docs/formats.md §7), built from Txns through the normal write path — no apply-time
// job command, so there is one implementation and every step is an ordinary linearizable write.
//
//   Acquire{job, lease, holder, max_epochs, prefix} — never waits:
//     0. A linearizable read of the lock's first-created key: held by another key → answered
//        {acquired: false, holder} without a write (busy workers polling cost no log entries).
//     1. LockTxn: if no key exists under the job's lock prefix and the job is queued, create the
//        own lock key K = lock/<id>/ + hex(lease) on the caller's lease. K is then the Mutex's
//        first-created key: the caller owns the lock exactly as etcd's Lock/clientv3 Mutex would
//        (so `etcdctl lock` on the name waits for it), and the token is K's create_revision (the
//        txn's revision). If K already owns the lock (a repeated Acquire), its token is reused;
//        if another key owns it, the answer is {acquired: false, holder}.
//     2. CountTxn, guarded on CREATE(K) == token (still the holder), MOD(epoch key) == the value
//        read in step 1 (a CAS: nobody counted in between) and the job still queued: Put the
//        epoch record {epoch + 1, token}; when that holder number exceeds 1 + max_epochs, in the
//        same txn move the job to dlq/, delete it from jobs/ and delete K. Raft applies the txn as
//        one entry at one revision, and the first compare holds exactly while the caller owns
//        the lock (no key with a lower create_revision can reappear under the name), so the count
//        and the dead-lettering are one linearizable step of the holder. A record already carrying
//        this token (a repeated Acquire) is not counted again. A failed compare re-reads from the
//        failure branch and retries (bounded); a lost K answers {acquired: false}.
//     Any error once K may exist deletes K (the caller was not told it holds the lock), as does a
//     client cancel that wins against the answer.
//   Status{job, prefix}: linearizable reads of the job, its lock owner, epoch, dlq and done keys.
//   Release{job, fencing_token, completed, prefix}: reads the lock's owner; if its create_revision
//     is the token, ReleaseTxn guarded on it deletes the owner key and, when completed, moves the
//     job from jobs/ to done/ (the record {epoch, token}). released = false for any other token.
//   ListDeadLetters{limit, prefix}: Status of every job under dlq/, in key order.
//
// Auth: Acquire and Release need read and write permission on the job's keys (job, lock prefix,
// epoch, dlq, done); Status read permission on them, ListDeadLetters on the dlq/ and epoch/
// prefixes. The writes carry the caller's auth stamp, so apply checks them again after an auth
// change.
//
// Metrics (per member: counted where the RPC was served): acquisitions, epoch changes, dead
// letters, releases by outcome (docs/metrics.md).
//
// Threading: async_rpc.h reactors; no handler thread waits. Work continues on the driver strand,
// the read pool and gRPC client threads; the counters are atomics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/v1/epoch.grpc.pb.h"

namespace epoch::server {

struct JobsMetrics {
  std::atomic<std::uint64_t> acquired{0};       // counted acquisitions (not dead-lettering ones)
  std::atomic<std::uint64_t> epoch_changes{0};  // counted acquisitions after a job's first
  std::atomic<std::uint64_t> dead_lettered{0};
  std::array<std::atomic<std::uint64_t>, 2> released{};  // [completed]
};

class JobsService final : public v1::Jobs::AsyncService {
 public:
  // `max_epoch_changes`: the limit for requests that name none (--job-max-epoch-changes).
  JobsService(NodeContext& node, std::uint32_t max_epoch_changes)
      : node_(node), max_epoch_changes_(max_epoch_changes) {}

  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  rpc::UnaryReactor* Acquire(rpc::CallContext* ctx, const v1::JobAcquireRequest* request,
                             v1::JobAcquireResponse* response);
  rpc::UnaryReactor* Status(rpc::CallContext* ctx, const v1::JobStatusRequest* request,
                            v1::JobStatusResponse* response);
  rpc::UnaryReactor* Release(rpc::CallContext* ctx, const v1::JobReleaseRequest* request,
                             v1::JobReleaseResponse* response);
  rpc::UnaryReactor* ListDeadLetters(rpc::CallContext* ctx,
                                     const v1::ListDeadLettersRequest* request,
                                     v1::ListDeadLettersResponse* response);

  void RenderMetrics(MetricsText& m) const;

 private:
  NodeContext& node_;
  const std::uint32_t max_epoch_changes_;
  JobsMetrics metrics_;
};

}  // namespace epoch::server
