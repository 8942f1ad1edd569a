#include "txn_compare.h"

#include "mvcc_read.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;

template <typename T>
int Compare3(const T& a, const T& b) {
  if (a < b) return -1;
  if (b < a) return 1;
  return 0;
}

// The value to compare against, per target; a mismatched target_union member counts as zero.
int CompareTarget(const pb::Compare& c, const mvccpb::KeyValue& kv) {
  switch (c.target()) {
    case pb::Compare::VALUE: {
      const std::string empty;
      const std::string& v = c.target_union_case() == pb::Compare::kValue ? c.value() : empty;
      return Compare3(kv.value(), v);
    }
    case pb::Compare::CREATE:
      return Compare3(kv.create_revision(), c.target_union_case() == pb::Compare::kCreateRevision
                                                ? c.create_revision()
                                                : std::int64_t{0});
    case pb::Compare::MOD:
      return Compare3(kv.mod_revision(), c.target_union_case() == pb::Compare::kModRevision
                                             ? c.mod_revision()
                                             : std::int64_t{0});
    case pb::Compare::VERSION:
      return Compare3(kv.version(), c.target_union_case() == pb::Compare::kVersion
                                        ? c.version()
                                        : std::int64_t{0});
    case pb::Compare::LEASE:
      return Compare3(kv.lease(),
                      c.target_union_case() == pb::Compare::kLease ? c.lease() : std::int64_t{0});
    default: return 0;
  }
}

Status AppendPath(const ReadContext& ctx, const pb::TxnRequest& txn, std::int64_t* keys_left,
                  std::vector<bool>* path) {
  bool ok = true;
  for (const pb::Compare& c : txn.compare()) {
    Result<bool> holds = EvaluateCompare(ctx, c, keys_left);
    if (!holds.ok()) return holds.status();
    if (!*holds) {
      ok = false;
      break;
    }
  }
  path->push_back(ok);
  for (const pb::RequestOp& op : ok ? txn.success() : txn.failure()) {
    if (op.request_case() == pb::RequestOp::kRequestTxn) {
      EPOCH_RETURN_IF_ERROR(AppendPath(ctx, op.request_txn(), keys_left, path));
    }
  }
  return Status::Ok();
}

}  // namespace

bool CompareKeyValue(const pb::Compare& c, const mvccpb::KeyValue& kv) {
  int result = CompareTarget(c, kv);
  switch (c.result()) {
    case pb::Compare::EQUAL: return result == 0;
    case pb::Compare::NOT_EQUAL: return result != 0;
    case pb::Compare::GREATER: return result > 0;
    case pb::Compare::LESS: return result < 0;
    default: return true;
  }
}

Result<bool> EvaluateCompare(const ReadContext& ctx, const pb::Compare& c,
                             std::int64_t* keys_left) {
  const std::int64_t max_keys = keys_left != nullptr ? *keys_left : kNoKeyBound;
  Result<RawRange> range = ReadRangeAt(*ctx.reader, MakeKeyRange(c.key(), c.range_end()),
                                       ctx.current, /*at_current=*/true, 0, false, max_keys);
  if (!range.ok()) return range.status();
  if (max_keys != kNoKeyBound) *keys_left -= range->count;
  if (range->kvs.empty()) {
    // Absent key: there is no way to represent a missing value, so VALUE compares fail; the
    // numeric targets compare against an all-zero key-value (CREATE == 0 means "absent").
    if (c.target() == pb::Compare::VALUE) return false;
    return CompareKeyValue(c, mvccpb::KeyValue());
  }
  for (const mvccpb::KeyValue& kv : range->kvs) {
    if (!CompareKeyValue(c, kv)) return false;
  }
  return true;
}

Result<std::vector<bool>> CompareToPath(const ReadContext& ctx, const pb::TxnRequest& txn,
                                        std::int64_t* keys_left) {
  std::vector<bool> path;
  EPOCH_RETURN_IF_ERROR(AppendPath(ctx, txn, keys_left, &path));
  return path;
}

}  // namespace epoch::server
