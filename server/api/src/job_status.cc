#include "job_status.h"

#include "epoch/api/recipe_wait.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

Result<pb::RangeResponse> ReadKey(const KvStore& store, const std::string& key,
                                  std::int64_t revision) {
  pb::RangeRequest r;
  r.set_key(key);
  r.set_revision(revision);
  return store.Range(r);
}

// The job's state at `revision` (0: the latest).
Status ReadAt(const KvStore& store, const jobs::QueueKeys& keys, std::int64_t revision,
              v1::JobStatusResponse* out) {
  Result<pb::RangeResponse> job = ReadKey(store, keys.Job(), revision);
  if (!job.ok()) return job.status();
  if (revision == 0) revision = job->header().revision();
  *out->mutable_header() = job->header();
  out->set_job(keys.id);
  out->set_exists(job->kvs_size() > 0);

  pb::RangeRequest first = recipe::FirstCreate(keys.LockPrefix());
  first.set_revision(revision);
  Result<pb::RangeResponse> owner = store.Range(first);
  if (!owner.ok()) return owner.status();
  Result<pb::RangeResponse> epoch = ReadKey(store, keys.Epoch(), revision);
  if (!epoch.ok()) return epoch.status();
  if (epoch->kvs_size() > 0) {
    Result<jobs::EpochRecord> record = jobs::ParseEpochRecord(epoch->kvs(0).value());
    if (!record.ok()) return record.status().Annotate(keys.Epoch());
    out->set_epoch_count(static_cast<std::uint64_t>(record->epoch));
    out->set_fencing_token(record->token);
  }
  if (owner->kvs_size() > 0) {
    const mvccpb::KeyValue& kv = owner->kvs(0);
    out->set_lease(kv.lease());
    out->set_holder(kv.value());
    out->set_fencing_token(kv.create_revision());
    Result<std::optional<LeaseInfo>> lease = store.GetLease(LeaseId(kv.lease()));
    if (!lease.ok()) return lease.status();
    if (lease->has_value()) out->set_lease_deadline_cluster_ms((*lease)->deadline_cluster_ms);
  }
  Result<pb::RangeResponse> dlq = ReadKey(store, keys.DlqJob(), revision);
  if (!dlq.ok()) return dlq.status();
  out->set_dead_lettered(dlq->kvs_size() > 0);
  Result<pb::RangeResponse> done = ReadKey(store, keys.DoneJob(), revision);
  if (!done.ok()) return done.status();
  out->set_completed(done->kvs_size() > 0);
  return Status::Ok();
}

}  // namespace

Status ReadJobStatus(const KvStore& store, const jobs::QueueKeys& keys,
                     v1::JobStatusResponse* out) {
  return ReadAt(store, keys, 0, out);
}

Status ReadDeadLetters(const KvStore& store, const std::string& prefix, std::int64_t limit,
                       v1::ListDeadLettersResponse* out) {
  const std::string dlq = prefix + "dlq/";
  pb::RangeRequest r;
  r.set_key(dlq);
  r.set_range_end(recipe::PrefixEnd(dlq));
  r.set_keys_only(true);
  r.set_limit(limit);
  Result<pb::RangeResponse> letters = store.Range(r);
  if (!letters.ok()) return letters.status();
  *out->mutable_header() = letters->header();
  for (const mvccpb::KeyValue& kv : letters->kvs()) {
    Result<jobs::QueueKeys> keys = jobs::KeysFor(prefix, kv.key().substr(dlq.size()));
    if (!keys.ok()) continue;  // not a job's dead letter (a nested key put by hand)
    v1::JobStatusResponse* job = out->add_jobs();
    EPOCH_RETURN_IF_ERROR(ReadAt(store, *keys, letters->header().revision(), job));
    job->clear_header();
  }
  return Status::Ok();
}

}  // namespace epoch::server
