// The KV write path shared by KvService (etcdserverpb.KV) and IdempotentService (epoch.v1
// Idempotent): each write's validation and permission check, which turn a client request into a
// Raft log command, and the write of that command (proposed here or forwarded to the leader).
// One implementation, so both services accept, refuse and apply exactly the same writes.
//
// Threading: called on the epoch-grpc threads; KvWriteDone runs on one (ClientQueue).
#pragma once

#include <functional>

#include "epoch/api/txn_read_throttle.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

// Validate `request`, check the caller's permission, and fill `internal` with the log command
// (stamped with the caller). A refusal is returned; `internal` is then meaningless.
Status PreparePut(NodeContext& node, const rpc::CallContext& ctx,
                  const etcdserverpb::PutRequest& request, v1::InternalRequest* internal);
Status PrepareDeleteRange(NodeContext& node, const rpc::CallContext& ctx,
                          const etcdserverpb::DeleteRangeRequest& request,
                          v1::InternalRequest* internal);
// Any txn; the caller decides what a read-only one means (IsReadOnlyTxn).
Status PrepareTxn(NodeContext& node, const rpc::CallContext& ctx,
                  const etcdserverpb::TxnRequest& request, v1::InternalRequest* internal);

using KvWriteDone = std::function<void(const Status&, const v1::InternalResponse&)>;

// Writes `request` through the log: refuses it when over --max-request-bytes, or when it was
// forwarded here and this member does not lead (a forwarded write never travels a second hop),
// or when it is a txn whose reads already pass --max-txn-read-keys on the applied state
// (KvStore::PrecheckTxnReads, counted on the read pool before anything is proposed, for a txn
// whose compares and Range ops could pass it), or when `throttle` (null: none) holds back the
// counts of this caller, whose txns were refused so too often;
// else proposes or forwards it (NodeContext::Write). `done` gets the response computed at apply
// time, on an epoch-grpc thread.
void WriteKv(NodeContext& node, const rpc::CallContext& ctx, TxnReadThrottle* throttle,
             v1::InternalRequest request, KvWriteDone done);

}  // namespace epoch::server
