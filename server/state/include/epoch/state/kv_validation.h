// Validation of etcd KV requests, exactly as etcd's v3rpc layer does it
// (etcd-io/etcd:etcdserver/api/v3rpc/key.go: checkRangeRequest, checkPutRequest,
// checkDeleteRequest, checkTxnRequest, checkIntervals), returning etcd's error messages
// (etcd_errors.h).
//
// Who calls it: the gRPC handlers before proposing (so bad input never reaches the log), and
// KvStore::Apply again at apply time (so an entry from a buggy or old proposer is rejected
// deterministically instead of crashing every replica).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>

#include "epoch/etcd_errors.h"
#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

struct KvLimits {
  // etcd --max-txn-ops: per level of a txn, the largest of |compare|, |success|, |failure|.
  std::size_t max_txn_ops = 128;
  // etcd --max-request-bytes: the encoded request (the Raft log command) may not exceed this.
  std::size_t max_request_bytes = 1536 * 1024;
  // Epoch's --max-txn-read-keys: the keys a txn with writes may read at apply time, on the Raft
  // thread (stamped into its entry as InternalRequest.txn_read_keys_max). Read-only txns are
  // served off the Raft thread and are not bounded.
  std::int64_t max_txn_read_keys = 10'000;
};

Status ValidateRange(const etcdserverpb::RangeRequest& r);
Status ValidatePut(const etcdserverpb::PutRequest& r);
Status ValidateDeleteRange(const etcdserverpb::DeleteRangeRequest& r);
// checkTxnRequest (op counts, compare keys, each op recursively) followed by the duplicate-key
// check of both branches.
Status ValidateTxn(const etcdserverpb::TxnRequest& r, const KvLimits& limits);
// etcd_errors::kRequestTooLarge when encoded_bytes > limits.max_request_bytes.
Status ValidateRequestSize(std::size_t encoded_bytes, const KvLimits& limits);

// epoch.v1.Idempotent keys: the longest session client id (the client library sends 16 random
// bytes) and the longest free-form key accepted.
inline constexpr std::size_t kIdempotencyClientIdMax = 64;
inline constexpr std::size_t kIdempotencyKeyMax = 256;

// True when no branch, at any depth, contains a Put or DeleteRange: such a txn can be served from
// a read view without going through the log.
bool IsReadOnlyTxn(const etcdserverpb::TxnRequest& r);

}  // namespace epoch::server
