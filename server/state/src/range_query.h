// etcd's Range semantics on top of the raw MVCC reads (etcd-io/etcd:etcdserver/apply.go Range,
// mvcc/kvstore_txn.go rangeKeys; docs/etcd-compatibility.md §3.3):
//   revision <= 0 reads the current revision; above it is "future", below the compact revision
//   "compacted"; count_only returns only the count; with a sort or a min/max filter every key is
//   fetched, filtered, sorted, and only then cut to `limit` (setting `more`); sort_order NONE
//   with a sort_target other than KEY means ASCEND; `count` is the number of keys in the range at
//   that revision before filters and limit; header.revision is the current revision.
//
// Thread-safety: pure functions of a StoreReader.
#pragma once

#include <cstdint>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "etcdserverpb/rpc.pb.h"
#include "store_reader.h"

namespace epoch::server {

// What a read sees: the reader, the revision it is at, and the compact revision (-1: none).
struct ReadContext {
  const StoreReader* reader;
  Revision current;
  Revision compact;
};

// etcd's revision checks for a read at `requested` (<= 0: current). Returns the revision to read.
Result<Revision> ResolveReadRevision(std::int64_t requested, Revision current, Revision compact);

// Executes a (validated) RangeRequest. `max_keys` bounds the keys it may visit (ReadRangeAt): a
// write txn's reads at apply time.
Result<etcdserverpb::RangeResponse> ExecuteRange(const ReadContext& ctx,
                                                 const etcdserverpb::RangeRequest& request,
                                                 std::int64_t max_keys = -1);

// The filter, sort and limit steps alone, on keys in key order. Sets *more when keys were cut.
void FilterSortLimit(const etcdserverpb::RangeRequest& request, std::vector<mvccpb::KeyValue>* kvs,
                     bool* more);

}  // namespace epoch::server
