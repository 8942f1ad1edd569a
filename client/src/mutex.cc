// Mutex: etcd's clientv3 concurrency.Mutex recipe step by step (see mutex.h for the steps).
#include "epoch/client/mutex.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "epoch/client/errors.h"
#include "recipe_wait.h"

namespace epoch::client {
namespace {

using recipe::OwnerQuery;
using recipe::SleepFor;

}  // namespace

Mutex::Mutex(Client* client, LeaseId lease, std::string name, std::stop_token lease_stop)
    : client_(client),
      lease_(lease),
      prefix_(std::move(name) + "/"),
      my_key_(fmt::format("{}{:x}", prefix_, lease.value())),
      lease_stop_(std::move(lease_stop)) {}

Mutex::Mutex(Client* client, const Session& session, std::string name)
    : Mutex(client, session.lease(), std::move(name), session.stop_token()) {}

bool Mutex::Owns(const etcdserverpb::TxnResponse& response, std::int64_t my_rev) {
  const auto& owner = response.responses(1).response_range().kvs();
  return owner.empty() || owner[0].create_revision() == my_rev;
}

Result<etcdserverpb::TxnResponse> Mutex::TryAcquire(const CallOptions& call) {
  etcdserverpb::TxnRequest txn;
  auto* absent = txn.add_compare();
  absent->set_key(my_key_);
  absent->set_target(etcdserverpb::Compare::CREATE);
  absent->set_result(etcdserverpb::Compare::EQUAL);
  absent->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(my_key_);
  put->set_value("");
  put->set_lease(lease_.value());
  *txn.add_success()->mutable_request_range() =
      OwnerQuery(prefix_, etcdserverpb::RangeRequest::ASCEND);
  txn.add_failure()->mutable_request_range()->set_key(my_key_);
  *txn.add_failure()->mutable_request_range() =
      OwnerQuery(prefix_, etcdserverpb::RangeRequest::ASCEND);

  Result<etcdserverpb::TxnResponse> response = client_->Txn(txn, call);
  if (!response.ok()) return response.status().Annotate("lock " + prefix_);
  if (response->responses_size() != 2) {
    return Status::Corruption("lock txn: expected 2 responses, got " +
                              std::to_string(response->responses_size()));
  }
  if (response->succeeded()) {
    my_rev_ = response->header().revision();
  } else {
    const auto& mine = response->responses(0).response_range().kvs();
    if (mine.empty()) return Status::Corruption("lock txn: own key neither absent nor present");
    my_rev_ = mine[0].create_revision();  // re-entrant: this lease already queued
  }
  return response;
}

Status Mutex::WaitDeletes(std::int64_t max_create_revision, const CallOptions& call) {
  return recipe::WaitOlderDeletes(*client_, prefix_, max_create_revision, call,
                                  "lock wait cancelled");
}

Result<FencingToken> Mutex::Lock(const LockOptions& options) {
  // One stop source for the whole wait: the caller's token, the lease's, and the timeout.
  std::stop_source stop;
  std::stop_callback caller_stop(options.stop, [&stop] { stop.request_stop(); });
  std::stop_callback lease_stop(lease_stop_, [&stop] { stop.request_stop(); });
  const auto start = std::chrono::steady_clock::now();
  std::jthread timer;
  if (options.timeout) {
    timer = std::jthread([&stop, timeout = *options.timeout](const std::stop_token& cancel_timer) {
      SleepFor(timeout, cancel_timer);
      if (!cancel_timer.stop_requested()) stop.request_stop();
    });
  }
  auto fail = [&](Status status) -> Result<FencingToken> {
    (void)Unlock();  // leave the queue; a fresh call, not bound to the stop token
    // Report why the wait ended, whichever call noticed it first.
    if (lease_stop_.stop_requested()) {
      return Status::Aborted("lock: lease lost: " + status.ToString());
    }
    if (options.stop.stop_requested()) {
      return Status::Aborted("lock: cancelled: " + status.ToString());
    }
    if (options.timeout && std::chrono::steady_clock::now() - start >= *options.timeout) {
      return Status::Timeout("lock: timed out: " + status.ToString());
    }
    return status;
  };

  CallOptions call;
  call.stop = stop.get_token();
  Result<etcdserverpb::TxnResponse> acquired = TryAcquire(call);
  if (!acquired.ok()) return fail(acquired.status());
  if (Owns(*acquired, my_rev_)) {
    header_ = acquired->header();
    token_ = FencingToken(my_rev_);
    return token_;
  }
  const Status waited = WaitDeletes(my_rev_ - 1, call);
  if (!waited.ok()) return fail(waited);

  // The Jepsen fix (etcd #11456): while we waited our lease may have expired and our key gone
  // with it; then the lock is NOT ours even though every earlier key was deleted.
  etcdserverpb::RangeRequest mine;
  mine.set_key(my_key_);
  Result<etcdserverpb::RangeResponse> check = client_->Range(mine, call);
  if (!check.ok()) return fail(check.status());
  if (check->kvs_size() == 0 || check->kvs(0).create_revision() != my_rev_) {
    my_rev_ = -1;
    return Status::FailedPrecondition(fmt::format(
        "lock {}: session expired: own key {} vanished while waiting", prefix_, my_key_));
  }
  if (lease_stop_.stop_requested()) return fail(Status::Aborted("lease lost"));
  header_ = check->header();
  token_ = FencingToken(my_rev_);
  return token_;
}

Result<std::optional<FencingToken>> Mutex::TryLock(const CallOptions& call) {
  Result<etcdserverpb::TxnResponse> acquired = TryAcquire(call);
  if (!acquired.ok()) {
    if (IsOutcomeUnknown(acquired.status())) (void)Unlock();
    return acquired.status();
  }
  if (Owns(*acquired, my_rev_)) {
    header_ = acquired->header();
    token_ = FencingToken(my_rev_);
    return std::optional<FencingToken>(token_);
  }
  // Someone else holds it: leave the queue again (clientv3 TryLock → ErrLocked).
  EPOCH_RETURN_IF_ERROR(Unlock(call));
  return std::optional<FencingToken>();
}

Status Mutex::Unlock(const CallOptions& call) {
  etcdserverpb::DeleteRangeRequest del;
  del.set_key(my_key_);
  // Deleting our own key is idempotent, so an unknown outcome may be retried.
  Status status = Status::Ok();
  for (int attempt = 0; attempt < 3; ++attempt) {
    Result<etcdserverpb::DeleteRangeResponse> deleted = client_->DeleteRange(del, call);
    if (deleted.ok()) {
      my_rev_ = -1;
      return Status::Ok();
    }
    status = deleted.status();
    if (!IsOutcomeUnknown(status)) break;
  }
  return status.Annotate("unlock " + my_key_);
}

etcdserverpb::Compare Mutex::IsOwnerCompare() const {
  etcdserverpb::Compare compare;
  compare.set_key(my_key_);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(my_rev_);
  return compare;
}

}  // namespace epoch::client
