#include "job_acquire.h"

#include <fmt/format.h>

#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

// CountTxn fails its MOD compare only when another write of the epoch key landed between the
// read and the txn (an operator's, or a stale holder's retried write): bound the re-reads.
constexpr int kCountAttempts = 5;

grpc::Status NotQueued(const jobs::QueueKeys& keys) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      fmt::format("epoch: job {} is not queued under {}", keys.id, keys.prefix));
}

const pb::RangeResponse& RangeAt(const pb::TxnResponse& txn, int i) {
  return txn.responses(i).response_range();
}

}  // namespace

void JobAcquisition::Start(NodeContext& node, JobsMetrics& metrics,
                           std::shared_ptr<RecipeCall> call, v1::JobAcquireResponse* response,
                           Params params) {
  std::shared_ptr<JobAcquisition> a(
      new JobAcquisition(node, metrics, std::move(call), response, std::move(params)));
  a->ReadFirst();
}

JobAcquisition::JobAcquisition(NodeContext& node, JobsMetrics& metrics,
                               std::shared_ptr<RecipeCall> call, v1::JobAcquireResponse* response,
                               Params params)
    : node_(node),
      metrics_(metrics),
      call_(std::move(call)),
      response_(response),
      params_(std::move(params)),
      own_key_(recipe::KeyFor(params_.keys.LockPrefix(), params_.lease)) {}

// A held or unqueued job costs no write: a linearizable read answers it (the lock txn alone
// decides ownership; this only skips hopeless attempts, as RecipeJobLeases does).
void JobAcquisition::ReadFirst() {
  node_.ReadBarrier(false, [self = shared_from_this()](const Status& s) {
    if (!s.ok()) {
      self->call_->Finish(ToGrpc(s));
      return;
    }
    const jobs::QueueKeys& keys = self->params_.keys;
    Result<pb::RangeResponse> owner =
        self->node_.store().Range(recipe::FirstCreate(keys.LockPrefix()));
    if (!owner.ok()) {
      self->call_->Finish(ToGrpc(owner.status()));
      return;
    }
    if (owner->kvs_size() > 0 && owner->kvs(0).key() != self->own_key_) {
      const std::string holder = owner->kvs(0).value();
      return self->Answer(
          owner->header(), [&](v1::JobAcquireResponse* r) { r->set_holder(holder); },
          /*holds_lock=*/false);
    }
    self->Lock();
  });
}

void JobAcquisition::Lock() {
  call_->SetCleanup([&node = node_, key = own_key_] {
    recipe::Delete(node, key, std::chrono::system_clock::now() + recipe::kRecipeWriteTimeout,
                   [](const grpc::Status&, const pb::DeleteRangeResponse&) {});
  });
  recipe::Txn(
      node_, jobs::LockTxn(params_.keys, own_key_, params_.lease, params_.holder),
      call_->deadline(),
      [self = shared_from_this()](const grpc::Status& s, const pb::TxnResponse& txn) {
        self->OnLocked(s, txn);
      },
      params_.stamp);
}

void JobAcquisition::OnLocked(const grpc::Status& s, const pb::TxnResponse& txn) {
  if (!s.ok()) return Fail(s);
  if (txn.responses_size() != 3) {
    return Fail(grpc::Status(grpc::StatusCode::INTERNAL, "jobs: unexpected lock txn response"));
  }
  header_ = txn.header();
  if (txn.succeeded()) return Count(txn.header().revision(), RangeAt(txn, 1), RangeAt(txn, 2), 0);
  const pb::RangeResponse& owner = RangeAt(txn, 0);
  const pb::RangeResponse& job = RangeAt(txn, 1);
  const bool mine = owner.kvs_size() > 0 && owner.kvs(0).key() == own_key_;
  if (mine) {  // a repeated Acquire: the lock is already ours
    if (job.kvs_size() == 0) return Fail(NotQueued(params_.keys));
    return Count(owner.kvs(0).create_revision(), job, RangeAt(txn, 2), 0);
  }
  if (job.kvs_size() == 0) {
    call_->Finish(NotQueued(params_.keys));
    return;
  }
  const std::string holder = owner.kvs_size() > 0 ? owner.kvs(0).value() : std::string();
  Answer(
      txn.header(), [&](v1::JobAcquireResponse* r) { r->set_holder(holder); },
      /*holds_lock=*/false);
}

void JobAcquisition::Count(std::int64_t token, const pb::RangeResponse& job,
                           const pb::RangeResponse& epoch, int attempt) {
  jobs::EpochRecord record;
  std::int64_t epoch_mod = 0;
  if (epoch.kvs_size() > 0) {
    Result<jobs::EpochRecord> parsed = jobs::ParseEpochRecord(epoch.kvs(0).value());
    if (!parsed.ok()) return Fail(ToGrpc(parsed.status().Annotate(params_.keys.Epoch())));
    record = *parsed;
    epoch_mod = epoch.kvs(0).mod_revision();
  }
  if (record.token == token) {  // counted by an earlier Acquire of this holder
    return Answer(
        header_,
        [&](v1::JobAcquireResponse* r) {
          r->set_acquired(true);
          r->set_fencing_token(token);
          r->set_epoch_count(static_cast<std::uint64_t>(record.epoch));
        },
        /*holds_lock=*/true);
  }
  jobs::Count count{own_key_,          token, epoch_mod, {record.epoch + 1, token}, false,
                    job.kvs(0).value()};
  count.dead_letter = jobs::DeadLetters(count.next.epoch, params_.max_epoch_changes);
  recipe::Txn(
      node_, jobs::CountTxn(params_.keys, count), call_->deadline(),
      [self = shared_from_this(), count, attempt](const grpc::Status& s,
                                                  const pb::TxnResponse& txn) {
        self->OnCounted(s, txn, count, attempt);
      },
      params_.stamp);
}

void JobAcquisition::OnCounted(const grpc::Status& s, const pb::TxnResponse& txn,
                               const jobs::Count& count, int attempt) {
  if (!s.ok()) return Fail(s);
  if (txn.succeeded()) {
    if (count.next.epoch > 1) metrics_.epoch_changes.fetch_add(1, std::memory_order_relaxed);
    if (count.dead_letter) {
      metrics_.dead_lettered.fetch_add(1, std::memory_order_relaxed);
    } else {
      metrics_.acquired.fetch_add(1, std::memory_order_relaxed);
    }
    return Answer(
        txn.header(),
        [&](v1::JobAcquireResponse* r) {
          r->set_acquired(!count.dead_letter);
          r->set_dead_lettered(count.dead_letter);
          r->set_fencing_token(count.token);
          r->set_epoch_count(static_cast<std::uint64_t>(count.next.epoch));
        },
        /*holds_lock=*/!count.dead_letter);
  }
  if (txn.responses_size() != 3) {
    return Fail(grpc::Status(grpc::StatusCode::INTERNAL, "jobs: unexpected count txn response"));
  }
  header_ = txn.header();
  const pb::RangeResponse& own = RangeAt(txn, 0);
  if (own.kvs_size() == 0 || own.kvs(0).create_revision() != count.token) {
    // The caller's lease ended between the two writes: it holds nothing.
    return Answer(
        txn.header(), [](v1::JobAcquireResponse*) {}, /*holds_lock=*/false);
  }
  if (RangeAt(txn, 1).kvs_size() == 0) return Fail(NotQueued(params_.keys));
  if (attempt + 1 >= kCountAttempts) {
    return Fail(
        grpc::Status(grpc::StatusCode::UNAVAILABLE,
                     fmt::format("epoch: the epoch count of job {} did not settle in {} tries",
                                 params_.keys.id, kCountAttempts)));
  }
  Count(count.token, RangeAt(txn, 1), RangeAt(txn, 2), attempt + 1);
}

void JobAcquisition::Answer(const pb::ResponseHeader& header,
                            const std::function<void(v1::JobAcquireResponse*)>& fill,
                            bool holds_lock) {
  const bool answered = call_->Finish(grpc::Status::OK, [&] {
    *response_->mutable_header() = header;
    node_.FillHeader(response_->mutable_header());
    response_->set_key(params_.keys.Job());
    fill(response_);
  });
  // Cancelled meanwhile: the client will never learn it holds the lock, so give it back.
  if (!answered && holds_lock) call_->RunCleanup();
}

void JobAcquisition::Fail(const grpc::Status& s) {
  call_->Finish(s);
  call_->RunCleanup();
}

}  // namespace epoch::server
