#include "kv_write.h"

#include <asio.hpp>
#include <chrono>

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/kv_validation.h"

namespace epoch::server {
namespace {

bool IsForwarded(const rpc::CallContext& ctx) {
  return ctx.client_metadata().count(kForwardedMetadata) > 0;
}

// Whether the compares and Range ops of `txn` (any branch, any depth) could visit more than
// `*left` keys: one over a range could; one of a single key visits at most one.
bool MayReadPast(const etcdserverpb::TxnRequest& txn, std::int64_t* left) {
  for (const etcdserverpb::Compare& c : txn.compare()) {
    if (!c.range_end().empty() || --*left < 0) return true;
  }
  for (const auto* branch : {&txn.success(), &txn.failure()}) {
    for (const etcdserverpb::RequestOp& op : *branch) {
      if (op.has_request_range()) {
        if (!op.request_range().range_end().empty() || --*left < 0) return true;
      }
      if (op.has_request_txn() && MayReadPast(op.request_txn(), left)) return true;
    }
  }
  return false;
}

// Proposes or forwards `request`; `done` runs on an epoch-grpc thread.
void Propose(NodeContext& node, std::chrono::system_clock::time_point deadline,
             v1::InternalRequest request, KvWriteDone done) {
  // The answer comes on the Raft strand (leader) or the peer thread (a forwarded write): finish
  // on the gRPC thread, where the answers one apply releases share one hop and each Finish costs
  // no wake-up (as for a follower's reads, NodeContext::ReadBarrier).
  node.Write(std::move(request), deadline,
             [&node, done = std::move(done)](const Status& s, const v1::InternalResponse& r) {
               node.client_queue().Dispatch([done, s, r] { done(s, r); });
             });
}

}  // namespace

Status PreparePut(NodeContext& node, const rpc::CallContext& ctx,
                  const etcdserverpb::PutRequest& request, v1::InternalRequest* internal) {
  EPOCH_RETURN_IF_ERROR(ValidatePut(request));
  EPOCH_RETURN_IF_ERROR(node.auth().Authorize(
      ctx,
      [&request](const AuthState& a, std::string_view user) {
        return CheckPutPermission(a, user, request);
      },
      internal));
  *internal->mutable_put() = request;
  return Status::Ok();
}

Status PrepareDeleteRange(NodeContext& node, const rpc::CallContext& ctx,
                          const etcdserverpb::DeleteRangeRequest& request,
                          v1::InternalRequest* internal) {
  EPOCH_RETURN_IF_ERROR(ValidateDeleteRange(request));
  EPOCH_RETURN_IF_ERROR(node.auth().Authorize(
      ctx,
      [&request](const AuthState& a, std::string_view user) {
        return CheckDeleteRangePermission(a, user, request);
      },
      internal));
  *internal->mutable_delete_range() = request;
  return Status::Ok();
}

Status PrepareTxn(NodeContext& node, const rpc::CallContext& ctx,
                  const etcdserverpb::TxnRequest& request, v1::InternalRequest* internal) {
  EPOCH_RETURN_IF_ERROR(ValidateTxn(request, node.config().limits));
  EPOCH_RETURN_IF_ERROR(node.auth().Authorize(
      ctx,
      [&request](const AuthState& a, std::string_view user) {
        return CheckTxnPermission(a, user, request);
      },
      internal));
  *internal->mutable_txn() = request;
  internal->set_txn_read_keys_max(node.config().limits.max_txn_read_keys);
  internal->set_txn_read_bound_counts_compares(true);
  return Status::Ok();
}

void WriteKv(NodeContext& node, const rpc::CallContext& ctx, TxnReadThrottle* throttle,
             v1::InternalRequest request, KvWriteDone done) {
  Status size = ValidateRequestSize(request.ByteSizeLong(), node.config().limits);
  if (!size.ok()) return done(size, {});
  if (IsForwarded(ctx) && node.driver().status().role != raft::Role::kLeader) {
    return done(etcd_errors::kNotLeader.ToStatus(), {});
  }
  std::int64_t read_keys_left = request.txn_read_keys_max();
  const bool precheck = request.has_txn() && read_keys_left > 0 && !IsForwarded(ctx) &&
                        MayReadPast(request.txn(), &read_keys_left);
  if (!precheck) return Propose(node, ctx.deadline(), std::move(request), std::move(done));
  std::string caller = throttle != nullptr ? throttle->KeyOf(ctx) : std::string();
  if (throttle != nullptr && !throttle->Admit(caller)) {
    return done(etcd_errors::kTooManyRequests.ToStatus(), {});
  }
  // --max-txn-read-keys before the log: the count (up to the bound, no values) runs on the read
  // pool, so a txn whose reads are already too many on the applied state costs neither this
  // gRPC thread nor the Raft thread. The apply-time bound stays for what passes.
  asio::post(
      node.read_pool(), [&node, throttle, caller = std::move(caller), deadline = ctx.deadline(),
                         request = std::move(request), done = std::move(done)]() mutable {
        Status reads = node.store().PrecheckTxnReads(request.txn(), TxnReadBound::Of(request));
        if (throttle != nullptr) throttle->Finish(caller, reads);
        if (!reads.ok()) {
          return node.client_queue().Dispatch([done, reads] { done(reads, {}); });
        }
        Propose(node, deadline, std::move(request), std::move(done));
      });
}

}  // namespace epoch::server
