#include "range_query.h"

#include <algorithm>
#include <functional>

#include "epoch/etcd_errors.h"
#include "mvcc_read.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;
using mvccpb::KeyValue;

bool NeedsFullScan(const pb::RangeRequest& r) {
  return r.sort_order() != pb::RangeRequest::NONE || r.sort_target() != pb::RangeRequest::KEY ||
         r.min_mod_revision() != 0 || r.max_mod_revision() != 0 || r.min_create_revision() != 0 ||
         r.max_create_revision() != 0;
}

void Prune(std::vector<KeyValue>* kvs, const std::function<bool(const KeyValue&)>& drop) {
  kvs->erase(std::remove_if(kvs->begin(), kvs->end(), drop), kvs->end());
}

// Orders by the sort target only; stable sorting keeps key order among equal elements.
bool LessByTarget(pb::RangeRequest::SortTarget target, const KeyValue& a, const KeyValue& b) {
  switch (target) {
    case pb::RangeRequest::KEY: return a.key() < b.key();
    case pb::RangeRequest::VERSION: return a.version() < b.version();
    case pb::RangeRequest::CREATE: return a.create_revision() < b.create_revision();
    case pb::RangeRequest::MOD: return a.mod_revision() < b.mod_revision();
    case pb::RangeRequest::VALUE: return a.value() < b.value();
    default: return false;
  }
}

}  // namespace

Result<Revision> ResolveReadRevision(std::int64_t requested, Revision current, Revision compact) {
  if (requested > current.value()) return etcd_errors::kFutureRev.ToStatus();
  Revision rev = requested <= 0 ? current : Revision(requested);
  if (rev < compact) return etcd_errors::kCompacted.ToStatus();
  return rev;
}

void FilterSortLimit(const pb::RangeRequest& r, std::vector<KeyValue>* kvs, bool* more) {
  if (r.max_mod_revision() != 0) {
    Prune(kvs, [&](const KeyValue& kv) { return kv.mod_revision() > r.max_mod_revision(); });
  }
  if (r.min_mod_revision() != 0) {
    Prune(kvs, [&](const KeyValue& kv) { return kv.mod_revision() < r.min_mod_revision(); });
  }
  if (r.max_create_revision() != 0) {
    Prune(kvs, [&](const KeyValue& kv) { return kv.create_revision() > r.max_create_revision(); });
  }
  if (r.min_create_revision() != 0) {
    Prune(kvs, [&](const KeyValue& kv) { return kv.create_revision() < r.min_create_revision(); });
  }

  pb::RangeRequest::SortOrder order = r.sort_order();
  if (order == pb::RangeRequest::NONE && r.sort_target() != pb::RangeRequest::KEY) {
    order = pb::RangeRequest::ASCEND;
  }
  const pb::RangeRequest::SortTarget target = r.sort_target();
  if (order == pb::RangeRequest::ASCEND) {
    std::stable_sort(kvs->begin(), kvs->end(), [target](const KeyValue& a, const KeyValue& b) {
      return LessByTarget(target, a, b);
    });
  } else if (order == pb::RangeRequest::DESCEND) {
    std::stable_sort(kvs->begin(), kvs->end(), [target](const KeyValue& a, const KeyValue& b) {
      return LessByTarget(target, b, a);
    });
  }

  *more = false;
  if (r.limit() > 0 && static_cast<std::int64_t>(kvs->size()) > r.limit()) {
    kvs->resize(static_cast<std::size_t>(r.limit()));
    *more = true;
  }
}

Result<pb::RangeResponse> ExecuteRange(const ReadContext& ctx, const pb::RangeRequest& r,
                                       std::int64_t max_keys) {
  Result<Revision> rev = ResolveReadRevision(r.revision(), ctx.current, ctx.compact);
  if (!rev.ok()) return rev.status();

  // Fetch one more than the limit to learn whether there are more, unless everything is needed.
  std::int64_t fetch_limit = 0;
  if (!NeedsFullScan(r) && r.limit() > 0) fetch_limit = r.limit() + 1;

  Result<RawRange> raw = ReadRangeAt(*ctx.reader, MakeKeyRange(r.key(), r.range_end()), *rev,
                                     *rev == ctx.current, fetch_limit, r.count_only(), max_keys);
  if (!raw.ok()) return raw.status();

  pb::RangeResponse resp;
  resp.mutable_header()->set_revision(ctx.current.value());
  resp.set_count(raw->count);
  if (r.count_only()) return resp;

  bool more = false;
  FilterSortLimit(r, &raw->kvs, &more);
  resp.set_more(more);
  for (KeyValue& kv : raw->kvs) {
    if (r.keys_only()) kv.clear_value();
    *resp.add_kvs() = std::move(kv);
  }
  return resp;
}

}  // namespace epoch::server
