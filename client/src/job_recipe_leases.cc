// RecipeJobLeases: see job_recipe_leases.h for the two-write acquisition and why the count is
// atomic.
#include "epoch/client/job_recipe_leases.h"

#include <fmt/format.h>

#include "epoch/client/errors.h"
#include "epoch/client/mutex.h"

namespace epoch::client {
namespace {

// Step 2 settles in one round unless an unknown outcome forces a re-read; bound the retries.
constexpr int kCountAttempts = 5;

etcdserverpb::Compare CompareCreate(const std::string& key, etcdserverpb::Compare::CompareResult r,
                                    std::int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(r);
  compare.set_create_revision(revision);
  return compare;
}

etcdserverpb::Compare CompareMod(const std::string& key, std::int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::MOD);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_mod_revision(revision);
  return compare;
}

void AddPut(etcdserverpb::TxnRequest* txn, const std::string& key, const std::string& value) {
  auto* put = txn->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
}

void AddDelete(etcdserverpb::TxnRequest* txn, const std::string& key) {
  txn->add_success()->mutable_request_delete_range()->set_key(key);
}

// Whether a key other than `own` is queued under the lock prefix.
Result<bool> OtherHolderOf(Client* client, const std::string& prefix, const std::string& own,
                           const CallOptions& call) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixRangeEnd(prefix));
  range.set_keys_only(true);
  range.set_limit(2);
  auto response = client->Range(range, call);
  if (!response.ok()) return response.status();
  for (const auto& kv : response->kvs()) {
    if (kv.key() != own) return true;
  }
  return false;
}

}  // namespace

RecipeJobLeases::RecipeJobLeases(Client* client, JobLeasesOptions options)
    : client_(client), options_(std::move(options)) {}

CallOptions RecipeJobLeases::Call(const WorkerSession& session) const {
  return CallOptions{options_.call_timeout, session.stop_token()};
}

Result<std::optional<JobLease>> RecipeJobLeases::TryAcquire(const JobSpec& job,
                                                            const WorkerSession& session) {
  const CallOptions call = Call(session);
  auto queued = client_->Get(options_.keys.Job(job.id), call);
  if (!queued.ok()) return queued.status();
  if (!queued->has_value()) return Status::NotFound("job " + job.id + " is not queued");

  auto lock = std::make_shared<Mutex>(client_, session.lease(), options_.keys.LockName(job.id),
                                      session.stop_token());
  // A read first: a job someone else holds costs no writes (TryLock would create and delete a
  // queue key). TryLock alone decides ownership; this only skips hopeless attempts.
  auto others = OtherHolderOf(client_, lock->prefix(), lock->key(), call);
  if (!others.ok()) return others.status();
  if (*others) return std::optional<JobLease>();
  auto token = lock->TryLock(call);
  if (!token.ok()) return token.status();
  if (!token->has_value()) return std::optional<JobLease>();

  Result<JobLease> counted = CountEpoch(job, lock, call);
  if (!counted.ok() || counted->dead_lettered) (void)lock->Unlock(call);
  if (!counted.ok()) return counted.status();
  return std::optional<JobLease>(std::move(*counted));
}

Result<JobLease> RecipeJobLeases::CountEpoch(const JobSpec& job, std::shared_ptr<Mutex> lock,
                                             const CallOptions& call) {
  const JobKeys& keys = options_.keys;
  const std::string epoch_key = keys.Epoch(job.id);
  const FencingToken token = lock->token();
  for (int attempt = 0; attempt < kCountAttempts; ++attempt) {
    auto current = client_->Get(epoch_key, call);
    if (!current.ok()) return current.status();
    EpochRecord record;
    std::int64_t mod = 0;
    if (current->has_value()) {
      auto parsed = ParseEpochRecord((*current)->value());
      if (!parsed.ok()) return parsed.status().Annotate(epoch_key);
      record = *parsed;
      mod = (*current)->mod_revision();
    }
    if (record.token == token) {  // counted by an earlier try whose outcome was unknown
      auto queued = client_->Get(keys.Job(job.id), call);
      if (!queued.ok()) return queued.status();
      if (queued->has_value()) return JobLease{job.id, token, record.epoch, false, lock};
      auto dead = client_->Get(keys.DlqJob(job.id), call);
      if (!dead.ok()) return dead.status();
      if (!dead->has_value()) return Status::NotFound("job " + job.id + " left the queue");
      return JobLease{job.id, token, record.epoch, true, lock};
    }

    const EpochRecord next{record.epoch + 1, token};
    const bool dead_letter = next.epoch - 1 > options_.max_epoch_changes;
    etcdserverpb::TxnRequest txn;
    *txn.add_compare() = lock->IsOwnerCompare();
    *txn.add_compare() = CompareMod(epoch_key, mod);
    *txn.add_compare() = CompareCreate(keys.Job(job.id), etcdserverpb::Compare::GREATER, 0);
    AddPut(&txn, epoch_key, EncodeEpochRecord(next));
    if (dead_letter) {
      AddPut(&txn, keys.DlqJob(job.id), job.payload);
      AddDelete(&txn, keys.Job(job.id));
    }
    txn.add_failure()->mutable_request_range()->set_key(lock->key());
    txn.add_failure()->mutable_request_range()->set_key(keys.Job(job.id));

    auto response = client_->Txn(txn, call);
    if (!response.ok()) {
      if (IsOutcomeUnknown(response.status()) && !call.stop.stop_requested()) continue;
      return response.status().Annotate("count epoch of " + job.id);
    }
    if (response->succeeded()) return JobLease{job.id, token, next.epoch, dead_letter, lock};
    const auto& mine = response->responses(0).response_range().kvs();
    if (mine.empty() || mine[0].create_revision() != token.value()) {
      return Status::Aborted("lost the lock of job " + job.id + " before counting its epoch");
    }
    if (response->responses(1).response_range().kvs().empty()) {
      return Status::NotFound("job " + job.id + " left the queue");
    }
    // The epoch key moved under us (only a holder writes it, so this is a recovered older
    // write landing late): read it again.
  }
  return Status::Unavailable(
      fmt::format("epoch count of job {} did not settle in {} tries", job.id, kCountAttempts));
}

Status RecipeJobLeases::Complete(const JobLease& lease, const WorkerSession& session) {
  const JobKeys& keys = options_.keys;
  const CallOptions call = Call(session);
  if (!lease.lock) return Status::FailedPrecondition("job lease without a lock");
  const std::string done_value = EncodeEpochRecord({lease.epoch, lease.token});
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = lease.lock->IsOwnerCompare();
  *txn.add_compare() = CompareCreate(keys.Job(lease.job_id), etcdserverpb::Compare::GREATER, 0);
  AddDelete(&txn, keys.Job(lease.job_id));
  AddPut(&txn, keys.DoneJob(lease.job_id), done_value);
  txn.add_failure()->mutable_request_range()->set_key(keys.Job(lease.job_id));

  auto response = client_->Txn(txn, call);
  if (!response.ok()) {
    if (!IsOutcomeUnknown(response.status())) return response.status();
    auto done = client_->Get(keys.DoneJob(lease.job_id), call);  // find out
    if (!done.ok()) return done.status();
    if (!done->has_value() || (*done)->value() != done_value) return response.status();
  } else if (!response->succeeded() && !response->responses(0).response_range().kvs().empty()) {
    return Status::Aborted("lost the lock of job " + lease.job_id + " before completing it");
  }
  // Completed now, or already out of the queue (completed by a later holder): unlock either way.
  return lease.lock->Unlock(call);
}

Status RecipeJobLeases::Release(const JobLease& lease, const WorkerSession& session) {
  if (!lease.lock) return Status::Ok();
  return lease.lock->Unlock(Call(session));
}

}  // namespace epoch::client
