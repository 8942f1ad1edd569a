#include "kv_write.h"

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/kv_validation.h"

namespace epoch::server {
namespace {

bool IsForwarded(const rpc::CallContext& ctx) {
  return ctx.client_metadata().count(kForwardedMetadata) > 0;
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
  return Status::Ok();
}

void WriteKv(NodeContext& node, const rpc::CallContext& ctx, v1::InternalRequest request,
             KvWriteDone done) {
  Status size = ValidateRequestSize(request.ByteSizeLong(), node.config().limits);
  if (!size.ok()) return done(size, {});
  if (IsForwarded(ctx) && node.driver().status().role != raft::Role::kLeader) {
    return done(etcd_errors::kNotLeader.ToStatus(), {});
  }
  // The answer comes on the Raft strand (leader) or the peer thread (a forwarded write): finish
  // on the gRPC thread, where the answers one apply releases share one hop and each Finish costs
  // no wake-up (as for a follower's reads, NodeContext::ReadBarrier).
  node.Write(std::move(request), ctx.deadline(),
             [&node, done = std::move(done)](const Status& s, const v1::InternalResponse& r) {
               node.client_queue().Dispatch([done, s, r] { done(s, r); });
             });
}

}  // namespace epoch::server
