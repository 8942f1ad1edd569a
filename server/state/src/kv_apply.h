// etcd's KV write semantics — Put, DeleteRange, Txn — applied inside one WriteTxn
// (etcd-io/etcd:etcdserver/apply.go Put, DeleteRange, Txn, checkRequestPut, checkRequestRange;
// docs/etcd-compatibility.md §3.1–3.2). Requests are validated (kv_validation.h) before they get
// here.
//
// Response headers carry only the revision; the gRPC layer fills cluster, member and term.
//   - Put: header.revision = the new revision; prev_kv on request. A Put with a lease requires the
//     lease to exist ("requested lease not found"); ignore_value/ignore_lease require the key to
//     exist ("key not found") and keep its value/lease.
//   - DeleteRange: header.revision = the new revision if a key was deleted, else the current one.
//   - Txn: all compares (nested ones on taken branches too) are evaluated first on the state
//     before the txn; then the lease/key checks of every Put and the revision checks of every
//     Range on the taken path; only then are the ops executed in order, each seeing the writes
//     before it. Nested ops' headers carry the revision they saw; a nested txn's header is empty.
//
// Thread-safety: applier thread only (ExecuteReadOnlyTxn: any thread, on its own reader).
#pragma once

#include "epoch/state/txn_read_bound.h"
#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"
#include "range_query.h"
#include "store_reader.h"
#include "write_txn.h"

namespace epoch::server {

class KvApplier {
 public:
  // `txn` null: read-only execution at ctx.current (Txn with no writes only). `bound` (the
  // entry's, TxnReadBound::Of) limits the keys a Txn's Range ops, and its compares when the bound
  // says so, visit all together: past it the Txn fails with kTxnReadTooLarge.
  KvApplier(ReadContext ctx, WriteTxn* txn, TxnReadBound bound = {})
      : ctx_(ctx),
        txn_(txn),
        read_keys_left_(bound.max_keys > 0 ? bound.max_keys : -1),
        compares_counted_(bound.counts_compares) {}

  Result<etcdserverpb::PutResponse> Put(const etcdserverpb::PutRequest& r);
  Result<etcdserverpb::DeleteRangeResponse> DeleteRange(const etcdserverpb::DeleteRangeRequest& r);
  Result<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& r);

 private:
  // The view for reads now (inside a write txn: including its writes so far).
  [[nodiscard]] ReadContext Now() const;
  Result<etcdserverpb::TxnResponse> ExecuteTxn(const etcdserverpb::TxnRequest& r,
                                               const std::vector<bool>& path, std::size_t* pos);
  Status ExecuteOp(const etcdserverpb::RequestOp& op, const std::vector<bool>& path,
                   std::size_t* pos, etcdserverpb::ResponseOp* out);

  ReadContext ctx_;
  WriteTxn* txn_;
  std::int64_t read_keys_left_;  // -1: no bound (ReadRangeAt's kNoKeyBound)
  bool compares_counted_;        // the compares' keys come off read_keys_left_ too
};

// The bound on a write txn's reads checked ahead of the log (KvStore::PrecheckTxnReads): the
// compares (when the bound counts them) and the Range ops on the path `r` takes at `pre` (its
// compares evaluated there), in execution order, the Ranges counted without their values, with
// the same bound and arithmetic as KvApplier at apply time, so the count visits at most
// `bound.max_keys` + 1 keys. kTxnReadTooLarge when the reads pass the bound; Ok when they do
// not, and whenever the answer would need more than that: a compare over a range under a bound
// that does not count compares, a DeleteRange on the path (later reads see its effect), or any
// other error (the apply reports it). A Put before a Range only adds keys, so counting on `pre`
// never counts more than the apply would on the same state.
Status PrecheckTxnReads(const ReadContext& pre, const etcdserverpb::TxnRequest& r,
                        TxnReadBound bound);

// Lease existence, as the Put checks need it.
Result<bool> LeaseExists(const StoreReader& reader, LeaseId id);

}  // namespace epoch::server
