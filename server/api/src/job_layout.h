// The keys and transactions of a job queue (docs/formats.md §7, client/README.md § Jobs): the
// same layout the client library's recipe runner writes, so queues, `epochctl jobs` and
// `etcdctl lock` work with either.
//
//   P jobs/<id>             the job (its value is the payload, copied verbatim to dlq/)
//   P lock/<id>/<lease hex> etcd's Mutex queue key, attached to the holder's lease; value = holder
//   P epoch/<id>            "epoch=<holders so far> token=<latest holder's token>"
//   P dlq/<id>              the dead-lettered job's value
//   P done/<id>             the completing holder's epoch record
//
// The transactions (why each is safe: jobs_service.h):
//   LockTxn     if  CREATE(range lock/<id>/) == 0  -- nobody holds or queues for the lock
//               and CREATE(job) > 0                -- queued
//               then Put(own key, holder, lease), Range(job), Range(epoch)
//               else Range(first-created lock key), Range(job), Range(epoch)
//   CountTxn    if  CREATE(own key) == token and MOD(epoch) == read and CREATE(job) > 0
//               then Put(epoch, {epoch + 1, token})
//                    [+ Put(dlq, job value), Delete(job), Delete(own key)   when dead-lettering]
//               else Range(own key), Range(job), Range(epoch)
//   ReleaseTxn  if  CREATE(owner key) == token [and CREATE(job) > 0 when completing]
//               then Delete(owner key) [+ Delete(job), Put(done, epoch record)]
//               else Range(owner key)
//
// Threading: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server::jobs {

// The runner's default queue prefix; an empty request prefix means this one.
inline constexpr std::string_view kDefaultPrefix = "epoch-jobs/";

struct QueueKeys {
  std::string prefix;
  std::string id;

  [[nodiscard]] std::string Job() const { return prefix + "jobs/" + id; }
  // The Mutex name's prefix: its queue keys are LockPrefix() + hex(lease).
  [[nodiscard]] std::string LockPrefix() const { return prefix + "lock/" + id + "/"; }
  [[nodiscard]] std::string Epoch() const { return prefix + "epoch/" + id; }
  [[nodiscard]] std::string DlqJob() const { return Dlq() + id; }
  [[nodiscard]] std::string DoneJob() const { return prefix + "done/" + id; }
  [[nodiscard]] std::string Dlq() const { return prefix + "dlq/"; }
};

// The keys of job `id` under `prefix` (empty: kDefaultPrefix). InvalidArgument for an empty id
// or one containing '/' (it would reach into another job's keys).
Result<QueueKeys> KeysFor(std::string_view prefix, std::string_view id);
// The queue's prefix alone (ListDeadLetters).
std::string QueuePrefix(std::string_view prefix);

struct EpochRecord {
  std::int64_t epoch = 0;  // holders so far; 0 = never acquired
  std::int64_t token = 0;  // the latest counted holder's fencing token
};
std::string EncodeEpochRecord(const EpochRecord& record);
// Corruption for anything but "epoch=<n> token=<t>" with n, t >= 0.
Result<EpochRecord> ParseEpochRecord(std::string_view value);

// Whether the acquisition that makes the job's `holders`th holder dead-letters it instead.
[[nodiscard]] inline bool DeadLetters(std::int64_t holders, std::int64_t max_epoch_changes) {
  return holders - 1 > max_epoch_changes;
}

etcdserverpb::TxnRequest LockTxn(const QueueKeys& keys, const std::string& own_key,
                                 std::int64_t lease, const std::string& holder);
struct Count {
  std::string own_key;
  std::int64_t token = 0;
  std::int64_t epoch_mod = 0;  // mod_revision of the epoch key read (0: absent)
  EpochRecord next;
  bool dead_letter = false;
  std::string job_value;  // copied to dlq/ when dead-lettering
};
etcdserverpb::TxnRequest CountTxn(const QueueKeys& keys, const Count& count);
etcdserverpb::TxnRequest ReleaseTxn(const QueueKeys& keys, const std::string& owner_key,
                                    std::int64_t token, bool completed,
                                    const std::string& done_value);

}  // namespace epoch::server::jobs
