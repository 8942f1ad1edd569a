// Election: etcd's clientv3 concurrency.Election recipe (see election.h for the steps).
#include "epoch/client/election.h"

#include <fmt/format.h>


#include "recipe_wait.h"

namespace epoch::client {
namespace {

using recipe::OwnerQuery;

etcdserverpb::Compare CreateIs(const std::string& key, std::int64_t revision) {
  etcdserverpb::Compare compare;
  compare.set_key(key);
  compare.set_target(etcdserverpb::Compare::CREATE);
  compare.set_result(etcdserverpb::Compare::EQUAL);
  compare.set_create_revision(revision);
  return compare;
}

}  // namespace

Election::Election(Client* client, LeaseId lease, std::string name, std::stop_token lease_stop)
    : client_(client),
      lease_(lease),
      prefix_(std::move(name) + "/"),
      my_key_(fmt::format("{}{:x}", prefix_, lease.value())),
      lease_stop_(std::move(lease_stop)) {}

Result<std::int64_t> Election::Campaign(const std::string& value, const CallOptions& options) {
  std::stop_source stop;
  std::stop_callback caller_stop(options.stop, [&stop] { stop.request_stop(); });
  std::stop_callback lease_stop(lease_stop_, [&stop] { stop.request_stop(); });
  CallOptions call{options.timeout, stop.get_token()};

  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CreateIs(my_key_, 0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(my_key_);
  put->set_value(value);
  put->set_lease(lease_.value());
  txn.add_failure()->mutable_request_range()->set_key(my_key_);
  Result<etcdserverpb::TxnResponse> response = client_->Txn(txn, call);
  if (!response.ok()) return response.status().Annotate("campaign " + prefix_);
  if (response->succeeded()) {
    my_rev_ = response->header().revision();
  } else {
    const auto& kvs = response->responses(0).response_range().kvs();
    if (kvs.empty()) return Status::Corruption("campaign txn: own key neither absent nor present");
    my_rev_ = kvs[0].create_revision();
    if (kvs[0].value() != value) EPOCH_RETURN_IF_ERROR(Proclaim(value, call));
  }
  Status waited = WaitDeletes(my_rev_ - 1, call);
  if (!waited.ok()) {
    (void)Resign();  // a fresh call, not bound to the stop token
    if (lease_stop_.stop_requested()) return Status::Aborted("campaign: lease lost");
    return waited;
  }
  return my_rev_;
}

Status Election::Proclaim(const std::string& value, const CallOptions& call) {
  if (my_rev_ < 0) return Status::FailedPrecondition("election: not a candidate");
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CreateIs(my_key_, my_rev_);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(my_key_);
  put->set_value(value);
  put->set_lease(lease_.value());
  Result<etcdserverpb::TxnResponse> response = client_->Txn(txn, call);
  if (!response.ok()) return response.status();
  if (!response->succeeded()) return Status::FailedPrecondition("election: session expired");
  return Status::Ok();
}

Status Election::Resign(const CallOptions& call) {
  if (my_rev_ < 0) return Status::Ok();
  etcdserverpb::TxnRequest txn;
  *txn.add_compare() = CreateIs(my_key_, my_rev_);
  txn.add_success()->mutable_request_delete_range()->set_key(my_key_);
  Result<etcdserverpb::TxnResponse> response = client_->Txn(txn, call);
  if (!response.ok()) return response.status();
  my_rev_ = -1;
  return Status::Ok();
}

Result<Election::LeaderInfo> Election::Leader(const CallOptions& call) {
  Result<etcdserverpb::RangeResponse> response =
      client_->Range(OwnerQuery(prefix_, etcdserverpb::RangeRequest::ASCEND), call);
  if (!response.ok()) return response.status();
  LeaderInfo info;
  info.revision = response->header().revision();
  if (response->kvs_size() > 0) info.kv = response->kvs(0);
  return info;
}

Status Election::WaitDeletes(std::int64_t max_create_revision, const CallOptions& call) {
  return recipe::WaitOlderDeletes(*client_, prefix_, max_create_revision, call,
                                  "campaign cancelled");
}

}  // namespace epoch::client
