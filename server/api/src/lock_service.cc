#include "epoch/api/lock_service.h"

#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/kv_validation.h"
#include "recipe_call.h"

namespace epoch::server {
namespace {

std::chrono::system_clock::time_point CleanupDeadline() {
  return std::chrono::system_clock::now() + recipe::kRecipeWriteTimeout;
}

// One Lock call from the moment its lease is known.
struct LockAttempt {
  NodeContext& node;
  RecipeEventFeed& feed;
  std::shared_ptr<RecipeCall> call;
  v3lockpb::LockResponse* response;  // only touched by the path that finishes the call
  std::string prefix;
  std::string key;
  std::int64_t lease = 0;
};

void Acquired(const std::shared_ptr<LockAttempt>& a, Revision token,
              const etcdserverpb::ResponseHeader& header) {
  const bool answered = a->call->Finish(grpc::Status::OK, [&] {
    *a->response->mutable_header() = header;
    a->node.FillHeader(a->response->mutable_header());
    a->response->set_key(a->key);
    a->call->context()->AddTrailingMetadata(kFencingTokenMetadata, std::to_string(token.value()));
  });
  // Cancelled meanwhile: the client will never learn it holds the lock, so give it back.
  if (!answered) a->call->RunCleanup();
}

void WaitForPredecessors(const std::shared_ptr<LockAttempt>& a, Revision own_rev) {
  auto wait = PredecessorWait::Start(
      a->node, a->feed, {a->prefix, a->key, own_rev},
      [a, own_rev](const grpc::Status& s, const etcdserverpb::ResponseHeader& header) {
        if (s.ok()) return Acquired(a, own_rev, header);
        a->call->RunCleanup();  // clientv3: Unlock on a failed wait
        a->call->Finish(s);
      });
  if (!a->call->SetWait(wait) && wait->Cancel()) a->call->RunCleanup();
}

void TryAcquire(const std::shared_ptr<LockAttempt>& a) {
  a->call->SetCleanup([&node = a->node, key = a->key] {
    recipe::Delete(node, key, CleanupDeadline(),
                   [](const grpc::Status&, const etcdserverpb::DeleteRangeResponse&) {});
  });
  recipe::Txn(a->node, recipe::CreateIfAbsent(a->key, "", a->lease, &a->prefix),
              a->call->deadline(),
              [a](const grpc::Status& s, const etcdserverpb::TxnResponse& txn) {
                if (!s.ok()) {
                  if (!a->call->Finish(s)) a->call->RunCleanup();
                  return;
                }
                if (txn.responses_size() != 2) {
                  if (!a->call->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                                    "lock: unexpected txn response"))) {
                    a->call->RunCleanup();
                  }
                  return;
                }
                const auto& mine = txn.responses(0).response_range();
                const Revision own_rev(txn.succeeded() || mine.kvs_size() == 0
                                           ? txn.header().revision()
                                           : mine.kvs(0).create_revision());
                const auto& owner = txn.responses(1).response_range();
                if (owner.kvs_size() == 0 || owner.kvs(0).create_revision() == own_rev.value()) {
                  return Acquired(a, own_rev, txn.header());
                }
                WaitForPredecessors(a, own_rev);
              });
}

}  // namespace

rpc::UnaryReactor* LockService::Lock(rpc::CallContext* ctx, const v3lockpb::LockRequest* request,
                                     v3lockpb::LockResponse* response) {
  // etcd's lock writes its key under the name's prefix: write permission on the whole prefix.
  Status allowed = node_.auth().Authorize(*ctx, [&](const AuthState& a, std::string_view user) {
    return CheckPrefixPermission(a, user, AuthAccess::kWrite, request->name() + "/");
  });
  if (!allowed.ok()) {
    rpc::UnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  std::shared_ptr<RecipeCall> call = RecipeCall::Create(ctx);
  // The request dies with the call (possibly before the callbacks): copy what they need.
  auto attempt = std::make_shared<LockAttempt>(
      LockAttempt{node_, feed_, call, response, request->name() + "/", {}, 0});
  recipe::ResolveLease(node_, request->lease(), ctx->deadline(),
                       [attempt](const grpc::Status& s, std::int64_t lease) {
                         if (!s.ok()) {
                           attempt->call->Finish(s);
                           return;
                         }
                         if (attempt->call->finished()) return;  // cancelled meanwhile
                         attempt->lease = lease;
                         attempt->key = recipe::KeyFor(attempt->prefix, lease);
                         TryAcquire(attempt);
                       });
  return call->reactor();
}

rpc::UnaryReactor* LockService::Unlock(rpc::CallContext* ctx,
                                       const v3lockpb::UnlockRequest* request,
                                       v3lockpb::UnlockResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  etcdserverpb::DeleteRangeRequest check;
  check.set_key(request->key());
  Status valid = ValidateDeleteRange(check);
  if (valid.ok()) {
    valid = node_.auth().Authorize(*ctx, [&check](const AuthState& a, std::string_view user) {
      return CheckDeleteRangePermission(a, user, check);
    });
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  recipe::Delete(
      node_, request->key(), ctx->deadline(),
      [reactor, response](const grpc::Status& s, const etcdserverpb::DeleteRangeResponse& deleted) {
        if (s.ok()) *response->mutable_header() = deleted.header();
        reactor->Finish(s);
      });
  return reactor;
}

void LockService::Register(rpc::Server& server) {
  using Async = v3lockpb::Lock::AsyncService;
  server.Unary(this, &Async::RequestLock,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Lock(c, q, r); },
               {.pending = 4, .notify_cancel = true});
  server.Unary(this, &Async::RequestUnlock,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Unlock(c, q, r); },
               {.pending = 4});
}

}  // namespace epoch::server
