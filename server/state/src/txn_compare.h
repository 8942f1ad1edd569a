// Txn compares, as etcd evaluates them (etcd-io/etcd:etcdserver/apply.go applyCompare,
// compareKV, compareToPath; docs/etcd-compatibility.md §3.2):
//   - a compare covers one key or, with range_end, every live key in the range, and holds only
//     if it holds for each of them;
//   - on an absent key (or an empty range) CREATE/MOD/VERSION/LEASE compare against 0, and VALUE
//     compares always fail;
//   - a target_union member other than the one `target` names counts as 0 (or "" for VALUE);
//   - an unknown CompareResult holds, an unknown CompareTarget compares as equal (etcd's switch
//     fall-throughs).
// All compares of a txn — nested txns on the taken branches included — are evaluated on the
// state before the txn's own writes.
//
// Thread-safety: pure functions of a StoreReader.
#pragma once

#include <vector>

#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"
#include "range_query.h"

namespace epoch::server {

// Whether `c` holds on the latest state of ctx. `keys_left` (optional; kNoKeyBound: none) is a
// bound on the keys the compare may visit, lowered by the keys it visited: past it, and as soon
// as the scan passes it, kTxnReadTooLarge.
Result<bool> EvaluateCompare(const ReadContext& ctx, const etcdserverpb::Compare& c,
                             std::int64_t* keys_left = nullptr);

// Whether `c` holds for one key-value (the absent-key case passes an empty KeyValue).
bool CompareKeyValue(const etcdserverpb::Compare& c, const mvccpb::KeyValue& kv);

// The branch taken by `txn` and every nested txn on taken branches, in depth-first order:
// path[0] is `txn`'s own outcome (true: success branch). `keys_left`: as for EvaluateCompare,
// over every compare evaluated (a failing compare ends its txn's list).
Result<std::vector<bool>> CompareToPath(const ReadContext& ctx, const etcdserverpb::TxnRequest& txn,
                                        std::int64_t* keys_left = nullptr);

}  // namespace epoch::server
