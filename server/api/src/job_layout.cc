#include "job_layout.h"

#include <fmt/format.h>

#include <charconv>

#include "epoch/api/recipe_wait.h"

namespace epoch::server::jobs {
namespace {

namespace pb = etcdserverpb;

bool ParseInt(std::string_view text, std::int64_t* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

pb::Compare Compare(const std::string& key, pb::Compare::CompareTarget target,
                    pb::Compare::CompareResult result, std::int64_t revision) {
  pb::Compare c;
  c.set_key(key);
  c.set_target(target);
  c.set_result(result);
  if (target == pb::Compare::MOD) {
    c.set_mod_revision(revision);
  } else {
    c.set_create_revision(revision);
  }
  return c;
}

void AddRange(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const std::string& key) {
  ops->Add()->mutable_request_range()->set_key(key);
}

void AddPut(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const std::string& key,
            const std::string& value, std::int64_t lease = 0) {
  pb::PutRequest* put = ops->Add()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
}

void AddDelete(google::protobuf::RepeatedPtrField<pb::RequestOp>* ops, const std::string& key) {
  ops->Add()->mutable_request_delete_range()->set_key(key);
}

}  // namespace

std::string QueuePrefix(std::string_view prefix) {
  return prefix.empty() ? std::string(kDefaultPrefix) : std::string(prefix);
}

Result<QueueKeys> KeysFor(std::string_view prefix, std::string_view id) {
  if (id.empty()) return Status::InvalidArgument("epoch: job id is empty");
  if (id.find('/') != std::string_view::npos) {
    return Status::InvalidArgument("epoch: job id must not contain '/'");
  }
  return QueueKeys{QueuePrefix(prefix), std::string(id)};
}

std::string EncodeEpochRecord(const EpochRecord& record) {
  return fmt::format("epoch={} token={}", record.epoch, record.token);
}

Result<EpochRecord> ParseEpochRecord(std::string_view value) {
  const std::size_t space = value.find(' ');
  const std::string_view epoch = value.substr(0, space);
  const std::string_view token =
      space == std::string_view::npos ? std::string_view() : value.substr(space + 1);
  EpochRecord r;
  if (!epoch.starts_with("epoch=") || !token.starts_with("token=") ||
      !ParseInt(epoch.substr(6), &r.epoch) || !ParseInt(token.substr(6), &r.token) || r.epoch < 0 ||
      r.token < 0) {
    return Status::Corruption(fmt::format("epoch: bad job epoch record '{}'", value));
  }
  return r;
}

pb::TxnRequest LockTxn(const QueueKeys& keys, const std::string& own_key, std::int64_t lease,
                       const std::string& holder) {
  pb::TxnRequest txn;
  const std::string lock_prefix = keys.LockPrefix();
  pb::Compare* free = txn.add_compare();
  *free = Compare(lock_prefix, pb::Compare::CREATE, pb::Compare::EQUAL, 0);
  free->set_range_end(recipe::PrefixEnd(lock_prefix));
  *txn.add_compare() = Compare(keys.Job(), pb::Compare::CREATE, pb::Compare::GREATER, 0);
  AddPut(txn.mutable_success(), own_key, holder, lease);
  AddRange(txn.mutable_success(), keys.Job());
  AddRange(txn.mutable_success(), keys.Epoch());
  *txn.add_failure()->mutable_request_range() = recipe::FirstCreate(lock_prefix);
  AddRange(txn.mutable_failure(), keys.Job());
  AddRange(txn.mutable_failure(), keys.Epoch());
  return txn;
}

pb::TxnRequest CountTxn(const QueueKeys& keys, const Count& count) {
  pb::TxnRequest txn;
  *txn.add_compare() = Compare(count.own_key, pb::Compare::CREATE, pb::Compare::EQUAL, count.token);
  *txn.add_compare() = Compare(keys.Epoch(), pb::Compare::MOD, pb::Compare::EQUAL, count.epoch_mod);
  *txn.add_compare() = Compare(keys.Job(), pb::Compare::CREATE, pb::Compare::GREATER, 0);
  AddPut(txn.mutable_success(), keys.Epoch(), EncodeEpochRecord(count.next));
  if (count.dead_letter) {
    AddPut(txn.mutable_success(), keys.DlqJob(), count.job_value);
    AddDelete(txn.mutable_success(), keys.Job());
    AddDelete(txn.mutable_success(), count.own_key);
  }
  AddRange(txn.mutable_failure(), count.own_key);
  AddRange(txn.mutable_failure(), keys.Job());
  AddRange(txn.mutable_failure(), keys.Epoch());
  return txn;
}

pb::TxnRequest ReleaseTxn(const QueueKeys& keys, const std::string& owner_key, std::int64_t token,
                          bool completed, const std::string& done_value) {
  pb::TxnRequest txn;
  *txn.add_compare() = Compare(owner_key, pb::Compare::CREATE, pb::Compare::EQUAL, token);
  if (completed) {
    *txn.add_compare() = Compare(keys.Job(), pb::Compare::CREATE, pb::Compare::GREATER, 0);
    AddDelete(txn.mutable_success(), keys.Job());
    AddPut(txn.mutable_success(), keys.DoneJob(), done_value);
  }
  AddDelete(txn.mutable_success(), owner_key);
  AddRange(txn.mutable_failure(), owner_key);
  return txn;
}

}  // namespace epoch::server::jobs
