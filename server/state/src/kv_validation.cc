// Mirrors etcd's v3rpc/key.go checks, in the same order, so the first error reported for a bad
// request is the one etcd would report.
#include "epoch/state/kv_validation.h"

#include <set>
#include <string>
#include <vector>

#include "epoch/etcd_errors.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;
using etcd_errors::kDuplicateKey;

Status ValidateRequestOp(const pb::RequestOp& op, const KvLimits& limits);

Status ValidateTxnShape(const pb::TxnRequest& r, const KvLimits& limits) {
  std::size_t ops = static_cast<std::size_t>(r.compare_size());
  ops = std::max(ops, static_cast<std::size_t>(r.success_size()));
  ops = std::max(ops, static_cast<std::size_t>(r.failure_size()));
  if (ops > limits.max_txn_ops) return etcd_errors::kTooManyOps.ToStatus();
  for (const pb::Compare& c : r.compare()) {
    if (c.key().empty()) return etcd_errors::kEmptyKey.ToStatus();
  }
  for (const pb::RequestOp& op : r.success()) EPOCH_RETURN_IF_ERROR(ValidateRequestOp(op, limits));
  for (const pb::RequestOp& op : r.failure()) EPOCH_RETURN_IF_ERROR(ValidateRequestOp(op, limits));
  return Status::Ok();
}

Status ValidateRequestOp(const pb::RequestOp& op, const KvLimits& limits) {
  switch (op.request_case()) {
    case pb::RequestOp::kRequestRange: return ValidateRange(op.request_range());
    case pb::RequestOp::kRequestPut: return ValidatePut(op.request_put());
    case pb::RequestOp::kRequestDeleteRange: return ValidateDeleteRange(op.request_delete_range());
    case pb::RequestOp::kRequestTxn: return ValidateTxnShape(op.request_txn(), limits);
    case pb::RequestOp::REQUEST_NOT_SET: break;
  }
  // etcd answers an empty RequestOp with ErrGRPCKeyNotFound.
  return etcd_errors::kKeyNotFound.ToStatus();
}

// A deleted interval [begin, end), or the single key `begin` when `point`. etcd builds a
// from-key delete ("\0" range_end) as the interval [key, "\0"), which contains no key at all, so
// from-key deletes never conflict with puts; we keep that quirk to accept exactly what etcd does.
struct DeletedInterval {
  std::string begin;
  std::string end;
  bool point = false;

  [[nodiscard]] bool Contains(const std::string& key) const {
    if (point) return key == begin;
    return begin <= key && key < end;
  }
};

struct IntervalSets {
  std::set<std::string> puts;
  std::vector<DeletedInterval> dels;

  [[nodiscard]] bool Deleted(const std::string& key) const {
    for (const DeletedInterval& d : dels) {
      if (d.Contains(key)) return true;
    }
    return false;
  }
};

// etcd's checkIntervals: puts and deletes of one list of ops (with the puts and deletes of nested
// txns) may not overlap. The two branches of a nested txn may put the same key, since only one
// of them runs.
Result<IntervalSets> CheckIntervals(const google::protobuf::RepeatedPtrField<pb::RequestOp>& ops) {
  IntervalSets out;
  for (const pb::RequestOp& op : ops) {
    if (op.request_case() != pb::RequestOp::kRequestDeleteRange) continue;
    const pb::DeleteRangeRequest& d = op.request_delete_range();
    if (d.range_end().empty()) {
      out.dels.push_back({d.key(), "", true});
    } else {
      out.dels.push_back({d.key(), d.range_end(), false});
    }
  }
  for (const pb::RequestOp& op : ops) {
    if (op.request_case() != pb::RequestOp::kRequestTxn) continue;
    Result<IntervalSets> then_sets = CheckIntervals(op.request_txn().success());
    if (!then_sets.ok()) return then_sets.status();
    Result<IntervalSets> else_sets = CheckIntervals(op.request_txn().failure());
    if (!else_sets.ok()) return else_sets.status();
    for (const std::string& k : then_sets->puts) {
      if (out.puts.contains(k) || out.Deleted(k)) return kDuplicateKey.ToStatus();
      out.puts.insert(k);
    }
    for (const std::string& k : else_sets->puts) {
      if (out.puts.contains(k) && !then_sets->puts.contains(k)) return kDuplicateKey.ToStatus();
      if (out.Deleted(k)) return kDuplicateKey.ToStatus();
      out.puts.insert(k);
    }
    for (DeletedInterval& d : then_sets->dels) out.dels.push_back(std::move(d));
    for (DeletedInterval& d : else_sets->dels) out.dels.push_back(std::move(d));
  }
  for (const pb::RequestOp& op : ops) {
    if (op.request_case() != pb::RequestOp::kRequestPut) continue;
    const std::string& k = op.request_put().key();
    if (out.puts.contains(k) || out.Deleted(k)) return kDuplicateKey.ToStatus();
    out.puts.insert(k);
  }
  return out;
}

bool IsKnownSortOrder(int v) { return pb::RangeRequest_SortOrder_IsValid(v); }
bool IsKnownSortTarget(int v) { return pb::RangeRequest_SortTarget_IsValid(v); }

}  // namespace

Status ValidateRange(const pb::RangeRequest& r) {
  if (r.key().empty()) return etcd_errors::kEmptyKey.ToStatus();
  if (!IsKnownSortOrder(r.sort_order()) || !IsKnownSortTarget(r.sort_target())) {
    return etcd_errors::kInvalidSortOption.ToStatus();
  }
  return Status::Ok();
}

Status ValidatePut(const pb::PutRequest& r) {
  if (r.key().empty()) return etcd_errors::kEmptyKey.ToStatus();
  if (r.ignore_value() && !r.value().empty()) return etcd_errors::kValueProvided.ToStatus();
  if (r.ignore_lease() && r.lease() != 0) return etcd_errors::kLeaseProvided.ToStatus();
  return Status::Ok();
}

Status ValidateDeleteRange(const pb::DeleteRangeRequest& r) {
  if (r.key().empty()) return etcd_errors::kEmptyKey.ToStatus();
  return Status::Ok();
}

Status ValidateTxn(const pb::TxnRequest& r, const KvLimits& limits) {
  EPOCH_RETURN_IF_ERROR(ValidateTxnShape(r, limits));
  Result<IntervalSets> success = CheckIntervals(r.success());
  if (!success.ok()) return success.status();
  Result<IntervalSets> failure = CheckIntervals(r.failure());
  if (!failure.ok()) return failure.status();
  return Status::Ok();
}

Status ValidateRequestSize(std::size_t encoded_bytes, const KvLimits& limits) {
  if (encoded_bytes > limits.max_request_bytes) return etcd_errors::kRequestTooLarge.ToStatus();
  return Status::Ok();
}

bool IsReadOnlyTxn(const pb::TxnRequest& r) {
  for (const auto* branch : {&r.success(), &r.failure()}) {
    for (const pb::RequestOp& op : *branch) {
      switch (op.request_case()) {
        case pb::RequestOp::kRequestPut:
        case pb::RequestOp::kRequestDeleteRange: return false;
        case pb::RequestOp::kRequestTxn:
          if (!IsReadOnlyTxn(op.request_txn())) return false;
          break;
        default: break;
      }
    }
  }
  return true;
}

}  // namespace epoch::server
