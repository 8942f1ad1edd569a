#include "kv_apply.h"

#include <functional>

#include "epoch/etcd_errors.h"
#include "epoch/state/kv_validation.h"
#include "mvcc_read.h"
#include "txn_compare.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;

using OpCheck = std::function<Status(const pb::RequestOp&)>;

// etcd's checkRequests: runs `check` on every non-txn op of the taken branches, walking the
// nested txns in the same depth-first order as CompareToPath.
Status CheckPath(const pb::TxnRequest& r, const std::vector<bool>& path, std::size_t* pos,
                 const OpCheck& check) {
  const bool ok = path.at(*pos);
  ++*pos;
  for (const pb::RequestOp& op : ok ? r.success() : r.failure()) {
    if (op.request_case() == pb::RequestOp::kRequestTxn) {
      EPOCH_RETURN_IF_ERROR(CheckPath(op.request_txn(), path, pos, check));
    } else {
      EPOCH_RETURN_IF_ERROR(check(op));
    }
  }
  return Status::Ok();
}

// etcd's checkRequestPut, on the state before the txn.
Status CheckPut(const ReadContext& pre, const pb::RequestOp& op) {
  if (op.request_case() != pb::RequestOp::kRequestPut) return Status::Ok();
  const pb::PutRequest& p = op.request_put();
  if (p.ignore_value() || p.ignore_lease()) {
    Result<std::optional<mvccpb::KeyValue>> prev = ReadLatest(*pre.reader, p.key());
    if (!prev.ok()) return prev.status();
    if (!prev->has_value()) return etcd_errors::kKeyNotFound.ToStatus();
  }
  if (p.lease() != 0) {
    Result<bool> exists = LeaseExists(*pre.reader, LeaseId(p.lease()));
    if (!exists.ok()) return exists.status();
    if (!*exists) return etcd_errors::kLeaseNotFound.ToStatus();
  }
  return Status::Ok();
}

// etcd's checkRequestRange: a Range inside a txn may not name a future or compacted revision.
Status CheckRange(const ReadContext& pre, const pb::RequestOp& op) {
  if (op.request_case() != pb::RequestOp::kRequestRange) return Status::Ok();
  const std::int64_t rev = op.request_range().revision();
  if (rev == 0) return Status::Ok();
  if (rev > pre.current.value()) return etcd_errors::kFutureRev.ToStatus();
  if (rev < pre.compact.value()) return etcd_errors::kCompacted.ToStatus();
  return Status::Ok();
}

bool HasRangeCompare(const pb::TxnRequest& r) {
  for (const pb::Compare& c : r.compare()) {
    if (!c.range_end().empty()) return true;
  }
  for (const auto* branch : {&r.success(), &r.failure()}) {
    for (const pb::RequestOp& op : *branch) {
      if (op.request_case() == pb::RequestOp::kRequestTxn && HasRangeCompare(op.request_txn())) {
        return true;
      }
    }
  }
  return false;
}

// PrecheckTxnReads' walk of the taken branches, in ExecuteTxn's order. `*left` is the bound
// still available (as KvApplier::read_keys_left_); `*stop` is set where counting must end.
Status PrecountPath(const ReadContext& pre, const pb::TxnRequest& r, const std::vector<bool>& path,
                    std::size_t* pos, std::int64_t* left, bool* stop) {
  const bool ok = path.at(*pos);
  ++*pos;
  for (const pb::RequestOp& op : ok ? r.success() : r.failure()) {
    switch (op.request_case()) {
      case pb::RequestOp::kRequestRange: {
        pb::RangeRequest counted = op.request_range();
        counted.set_count_only(true);  // keys are counted, values never decoded
        Result<pb::RangeResponse> got = ExecuteRange(pre, counted, *left);
        if (got.status().Is(ErrorId::kTxnReadTooLarge)) return got.status();
        if (!got.ok()) {
          *stop = true;
          return Status::Ok();
        }
        *left -= got->count();
        break;
      }
      case pb::RequestOp::kRequestDeleteRange: *stop = true; return Status::Ok();
      case pb::RequestOp::kRequestTxn:
        EPOCH_RETURN_IF_ERROR(PrecountPath(pre, op.request_txn(), path, pos, left, stop));
        if (*stop) return Status::Ok();
        break;
      case pb::RequestOp::kRequestPut:
      case pb::RequestOp::REQUEST_NOT_SET: break;
    }
  }
  return Status::Ok();
}

}  // namespace

Status PrecheckTxnReads(const ReadContext& pre, const pb::TxnRequest& r, TxnReadBound bound) {
  if (bound.max_keys <= 0 || (!bound.counts_compares && HasRangeCompare(r))) return Status::Ok();
  std::int64_t left = bound.max_keys;
  Result<std::vector<bool>> path = CompareToPath(pre, r, bound.counts_compares ? &left : nullptr);
  if (path.status().Is(ErrorId::kTxnReadTooLarge)) return path.status();
  if (!path.ok()) return Status::Ok();
  std::size_t pos = 0;
  bool stop = false;
  return PrecountPath(pre, r, *path, &pos, &left, &stop);
}

Result<bool> LeaseExists(const StoreReader& reader, LeaseId id) {
  Result<std::optional<std::string>> lease = reader.Get(LeaseKey(id));
  if (!lease.ok()) return lease.status();
  return lease->has_value();
}

ReadContext KvApplier::Now() const {
  ReadContext now = ctx_;
  if (txn_ != nullptr) now.current = txn_->current();
  return now;
}

Result<pb::PutResponse> KvApplier::Put(const pb::PutRequest& r) {
  if (txn_ == nullptr) return Status::FailedPrecondition("put in a read-only txn");
  if (r.lease() != 0) {
    Result<bool> exists = LeaseExists(*ctx_.reader, LeaseId(r.lease()));
    if (!exists.ok()) return exists.status();
    if (!*exists) return etcd_errors::kLeaseNotFound.ToStatus();
  }
  // The previous value is needed for the response or as the new value; the lease comes with the
  // metadata, which is all a plain put needs (WriteTxn::PreviousForPut may take it from cache).
  bool value_known = true;
  Result<std::optional<mvccpb::KeyValue>> prev =
      txn_->PreviousForPut(r.key(), r.prev_kv() || r.ignore_value(), &value_known);
  if (!prev.ok()) return prev.status();
  mvccpb::KeyValue* prev_kv = prev->has_value() ? &**prev : nullptr;
  if ((r.ignore_value() || r.ignore_lease()) && prev_kv == nullptr) {
    return etcd_errors::kKeyNotFound.ToStatus();
  }
  pb::PutResponse resp;
  // Copied before the write: WriteTxn::Put moves the previous value into its event.
  if (r.prev_kv() && prev_kv != nullptr) *resp.mutable_prev_kv() = *prev_kv;
  const std::string& value = r.ignore_value() ? prev_kv->value() : r.value();
  const LeaseId lease(r.ignore_lease() ? prev_kv->lease() : r.lease());

  Result<std::int64_t> mod_revision = txn_->Put(r.key(), value, lease, prev_kv, value_known);
  if (!mod_revision.ok()) return mod_revision.status();
  resp.mutable_header()->set_revision(*mod_revision);
  return resp;
}

Result<pb::DeleteRangeResponse> KvApplier::DeleteRange(const pb::DeleteRangeRequest& r) {
  if (txn_ == nullptr) return Status::FailedPrecondition("delete in a read-only txn");
  Result<std::vector<mvccpb::KeyValue>> deleted =
      txn_->DeleteRange(MakeKeyRange(r.key(), r.range_end()));
  if (!deleted.ok()) return deleted.status();
  pb::DeleteRangeResponse resp;
  resp.set_deleted(static_cast<std::int64_t>(deleted->size()));
  if (r.prev_kv()) {
    for (mvccpb::KeyValue& kv : *deleted) *resp.add_prev_kvs() = std::move(kv);
  }
  resp.mutable_header()->set_revision(txn_->current().value());
  return resp;
}

Result<pb::TxnResponse> KvApplier::Txn(const pb::TxnRequest& r) {
  // Everything up to the execution reads the state before this txn.
  const ReadContext pre = Now();
  Result<std::vector<bool>> path =
      CompareToPath(pre, r, compares_counted_ ? &read_keys_left_ : nullptr);
  if (!path.ok()) return path.status();
  if (!IsReadOnlyTxn(r)) {
    if (txn_ == nullptr) return Status::FailedPrecondition("write ops in a read-only txn");
    std::size_t pos = 0;
    EPOCH_RETURN_IF_ERROR(
        CheckPath(r, *path, &pos, [&](const pb::RequestOp& op) { return CheckPut(pre, op); }));
  }
  std::size_t pos = 0;
  EPOCH_RETURN_IF_ERROR(
      CheckPath(r, *path, &pos, [&](const pb::RequestOp& op) { return CheckRange(pre, op); }));

  pos = 0;
  Result<pb::TxnResponse> resp = ExecuteTxn(r, *path, &pos);
  if (!resp.ok()) return resp.status();
  resp->mutable_header()->set_revision(Now().current.value());
  return resp;
}

Result<pb::TxnResponse> KvApplier::ExecuteTxn(const pb::TxnRequest& r,
                                              const std::vector<bool>& path, std::size_t* pos) {
  pb::TxnResponse resp;
  const bool ok = path.at(*pos);
  ++*pos;
  resp.set_succeeded(ok);
  resp.mutable_header();
  for (const pb::RequestOp& op : ok ? r.success() : r.failure()) {
    EPOCH_RETURN_IF_ERROR(ExecuteOp(op, path, pos, resp.add_responses()));
  }
  return resp;
}

Status KvApplier::ExecuteOp(const pb::RequestOp& op, const std::vector<bool>& path,
                            std::size_t* pos, pb::ResponseOp* out) {
  switch (op.request_case()) {
    case pb::RequestOp::kRequestRange: {
      Result<pb::RangeResponse> r = ExecuteRange(Now(), op.request_range(), read_keys_left_);
      if (!r.ok()) return r.status();
      // A Range within the bound visited count() keys (count_only and limits scan them all).
      if (read_keys_left_ != kNoKeyBound) read_keys_left_ -= r->count();
      *out->mutable_response_range() = std::move(*r);
      return Status::Ok();
    }
    case pb::RequestOp::kRequestPut: {
      Result<pb::PutResponse> r = Put(op.request_put());
      if (!r.ok()) return r.status();
      *out->mutable_response_put() = std::move(*r);
      return Status::Ok();
    }
    case pb::RequestOp::kRequestDeleteRange: {
      Result<pb::DeleteRangeResponse> r = DeleteRange(op.request_delete_range());
      if (!r.ok()) return r.status();
      *out->mutable_response_delete_range() = std::move(*r);
      return Status::Ok();
    }
    case pb::RequestOp::kRequestTxn: {
      Result<pb::TxnResponse> r = ExecuteTxn(op.request_txn(), path, pos);
      if (!r.ok()) return r.status();
      *out->mutable_response_txn() = std::move(*r);
      return Status::Ok();
    }
    case pb::RequestOp::REQUEST_NOT_SET: break;
  }
  return etcd_errors::kKeyNotFound.ToStatus();
}

}  // namespace epoch::server
