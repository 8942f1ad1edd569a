#include "epoch/api/election_service.h"

#include "election_observe.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "recipe_call.h"

namespace epoch::server {
namespace {

namespace epb = v3electionpb;
namespace pb = etcdserverpb;

// etcd's v3election and concurrency errors (plain Go errors: code UNKNOWN).
grpc::Status MissingLeaderKey() {
  return grpc::Status(grpc::StatusCode::UNKNOWN, "\"leader\" field must be provided");
}
grpc::Status NotLeader() { return grpc::Status(grpc::StatusCode::UNKNOWN, "election: not leader"); }
grpc::Status NoLeader() { return grpc::Status(grpc::StatusCode::UNKNOWN, "election: no leader"); }

std::chrono::system_clock::time_point CleanupDeadline() {
  return std::chrono::system_clock::now() + recipe::kRecipeWriteTimeout;
}

pb::RequestOp PutOp(const std::string& key, const std::string& value, std::int64_t lease) {
  pb::RequestOp op;
  op.mutable_request_put()->set_key(key);
  op.mutable_request_put()->set_value(value);
  op.mutable_request_put()->set_lease(lease);
  return op;
}

pb::RequestOp DeleteOp(const std::string& key) {
  pb::RequestOp op;
  op.mutable_request_delete_range()->set_key(key);
  return op;
}

// One Campaign call from the moment its lease is known.
struct CampaignAttempt {
  NodeContext& node;
  RecipeEventFeed& feed;
  std::shared_ptr<RecipeCall> call;
  epb::CampaignResponse* response;  // only touched by the path that finishes the call
  std::string name;
  std::string value;
  std::string key;
  std::int64_t lease = 0;
  Revision rev;
  pb::ResponseHeader header;  // of the campaign txn (etcd's e.Header())
};

void Elected(const std::shared_ptr<CampaignAttempt>& a) {
  const bool answered = a->call->Finish(grpc::Status::OK, [&] {
    *a->response->mutable_header() = a->header;
    a->node.FillHeader(a->response->mutable_header());
    epb::LeaderKey* leader = a->response->mutable_leader();
    leader->set_name(a->name);
    leader->set_key(a->key);
    leader->set_rev(a->rev.value());
    leader->set_lease(a->lease);
    a->call->context()->AddTrailingMetadata(kFencingTokenMetadata, std::to_string(a->rev.value()));
  });
  if (!answered) a->call->RunCleanup();  // cancelled meanwhile: resign
}

void WaitForPredecessors(const std::shared_ptr<CampaignAttempt>& a) {
  auto wait = PredecessorWait::Start(a->node, a->feed, {a->name + "/", a->key, a->rev},
                                     [a](const grpc::Status& s, const pb::ResponseHeader&) {
                                       if (s.ok()) return Elected(a);
                                       a->call->RunCleanup();
                                       a->call->Finish(s);
                                     });
  if (!a->call->SetWait(wait) && wait->Cancel()) a->call->RunCleanup();
}

// The campaign txn answered: remember the key's revision, proclaim a changed value, then wait.
void Campaigned(const std::shared_ptr<CampaignAttempt>& a, const pb::TxnResponse& txn) {
  a->header = txn.header();
  const auto& existing = txn.responses_size() > 0 ? txn.responses(0).response_range()
                                                  : pb::RangeResponse::default_instance();
  const bool existed = !txn.succeeded() && existing.kvs_size() > 0;
  a->rev = Revision(existed ? existing.kvs(0).create_revision() : txn.header().revision());
  a->call->SetCleanup([&node = a->node, key = a->key, rev = a->rev] {
    recipe::Txn(node, recipe::IfCreated(key, rev.value(), DeleteOp(key)), CleanupDeadline(),
                [](const grpc::Status&, const pb::TxnResponse&) {});
  });
  if (a->call->finished()) return a->call->RunCleanup();
  if (!existed || existing.kvs(0).value() == a->value) return WaitForPredecessors(a);
  recipe::Txn(a->node, recipe::IfCreated(a->key, a->rev.value(), PutOp(a->key, a->value, a->lease)),
              a->call->deadline(), [a](const grpc::Status& s, const pb::TxnResponse& proclaimed) {
                if (s.ok() && proclaimed.succeeded()) return WaitForPredecessors(a);
                a->call->RunCleanup();
                a->call->Finish(s.ok() ? NotLeader() : s);
              });
}

rpc::UnaryReactor* FinishNow(rpc::CallContext* ctx, const grpc::Status& s) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

// An Observe stream refused before it starts.
class RefusedStream final : public rpc::WriteReactor<epb::LeaderResponse> {
 public:
  explicit RefusedStream(const grpc::Status& why) { Finish(why); }
  void OnDone() override { delete this; }
};

// With auth on, the caller's permission of kind `access` on every key of the election `name`
// (etcd's election keys live under "name/").
Status AuthorizeElection(NodeContext& node, rpc::CallContext* ctx, AuthAccess access,
                         const std::string& name) {
  return node.auth().Authorize(*ctx, [&](const AuthState& a, std::string_view user) {
    return CheckPrefixPermission(a, user, access, name + "/");
  });
}

// With auth on, write permission on the leader key itself (Proclaim and Resign write it).
Status AuthorizeLeaderKey(NodeContext& node, rpc::CallContext* ctx, const std::string& key) {
  return node.auth().Authorize(*ctx, [&](const AuthState& a, std::string_view user) {
    return CheckKeyPermission(a, user, AuthAccess::kWrite, key, {});
  });
}

}  // namespace

rpc::UnaryReactor* ElectionService::Campaign(rpc::CallContext* ctx,
                                             const epb::CampaignRequest* request,
                                             epb::CampaignResponse* response) {
  Status allowed = AuthorizeElection(node_, ctx, AuthAccess::kWrite, request->name());
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  std::shared_ptr<RecipeCall> call = RecipeCall::Create(ctx);
  auto attempt = std::make_shared<CampaignAttempt>(CampaignAttempt{
      node_, feed_, call, response, request->name(), request->value(), {}, 0, Revision(0), {}});
  recipe::ResolveLease(
      node_, request->lease(), ctx->deadline(), [attempt](const grpc::Status& s, std::int64_t l) {
        if (!s.ok()) {
          attempt->call->Finish(s);
          return;
        }
        if (attempt->call->finished()) return;  // cancelled meanwhile
        attempt->lease = l;
        attempt->key = recipe::KeyFor(attempt->name + "/", l);
        recipe::Txn(attempt->node, recipe::CreateIfAbsent(attempt->key, attempt->value, l, nullptr),
                    attempt->call->deadline(),
                    [attempt](const grpc::Status& txn_status, const pb::TxnResponse& txn) {
                      if (!txn_status.ok()) {
                        attempt->call->Finish(txn_status);
                        return;
                      }
                      Campaigned(attempt, txn);
                    });
      });
  return call->reactor();
}

rpc::UnaryReactor* ElectionService::Proclaim(rpc::CallContext* ctx,
                                             const epb::ProclaimRequest* request,
                                             epb::ProclaimResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  if (!request->has_leader()) {
    reactor->Finish(MissingLeaderKey());
    return reactor;
  }
  const epb::LeaderKey leader = request->leader();
  Status allowed = AuthorizeLeaderKey(node_, ctx, leader.key());
  if (!allowed.ok()) {
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  const std::string value = request->value();
  const auto deadline = ctx->deadline();
  recipe::ResolveLease(
      node_, leader.lease(), deadline,
      [this, reactor, response, leader, value, deadline](const grpc::Status& s,
                                                         std::int64_t lease) {
        if (!s.ok()) return reactor->Finish(s);
        recipe::Txn(
            node_, recipe::IfCreated(leader.key(), leader.rev(), PutOp(leader.key(), value, lease)),
            deadline, [reactor, response](const grpc::Status& ts, const pb::TxnResponse& txn) {
              if (!ts.ok()) return reactor->Finish(ts);
              if (!txn.succeeded()) return reactor->Finish(NotLeader());
              *response->mutable_header() = txn.header();
              reactor->Finish(grpc::Status::OK);
            });
      });
  return reactor;
}

rpc::UnaryReactor* ElectionService::Resign(rpc::CallContext* ctx, const epb::ResignRequest* request,
                                           epb::ResignResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  if (!request->has_leader()) {
    reactor->Finish(MissingLeaderKey());
    return reactor;
  }
  const epb::LeaderKey& leader = request->leader();
  Status allowed = AuthorizeLeaderKey(node_, ctx, leader.key());
  if (!allowed.ok()) {
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  recipe::Txn(node_, recipe::IfCreated(leader.key(), leader.rev(), DeleteOp(leader.key())),
              ctx->deadline(),
              [reactor, response](const grpc::Status& s, const pb::TxnResponse& txn) {
                if (s.ok()) *response->mutable_header() = txn.header();
                reactor->Finish(s);
              });
  return reactor;
}

rpc::UnaryReactor* ElectionService::Leader(rpc::CallContext* ctx, const epb::LeaderRequest* request,
                                           epb::LeaderResponse* response) {
  Status allowed = AuthorizeElection(node_, ctx, AuthAccess::kRead, request->name());
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  recipe::LinearizableRange(node_, recipe::FirstCreate(request->name() + "/"),
                            [reactor, response](const grpc::Status& s, const pb::RangeResponse& r) {
                              if (!s.ok()) return reactor->Finish(s);
                              if (r.kvs_size() == 0) return reactor->Finish(NoLeader());
                              *response->mutable_header() = r.header();
                              *response->mutable_kv() = r.kvs(0);
                              reactor->Finish(grpc::Status::OK);
                            });
  return reactor;
}

rpc::WriteReactor<epb::LeaderResponse>* ElectionService::Observe(
    rpc::CallContext* ctx, const epb::LeaderRequest* request) {
  Status allowed = AuthorizeElection(node_, ctx, AuthAccess::kRead, request->name());
  if (!allowed.ok()) return new RefusedStream(ToGrpc(allowed));
  return ObserveStream::Start(node_, feed_, request->name() + "/");
}

void ElectionService::Register(rpc::Server& server) {
  using Async = v3electionpb::Election::AsyncService;
  server.Unary(this, &Async::RequestCampaign,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Campaign(c, q, r); },
               {.pending = 2, .notify_cancel = true});
  server.Unary(this, &Async::RequestProclaim,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Proclaim(c, q, r); },
               {.pending = 2});
  server.Unary(this, &Async::RequestLeader,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Leader(c, q, r); },
               {.pending = 2});
  server.ServerStream(this, &Async::RequestObserve,
                      [this](rpc::CallContext* c, const auto* q) { return Observe(c, q); });
  server.Unary(this, &Async::RequestResign,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Resign(c, q, r); },
               {.pending = 2});
}

}  // namespace epoch::server
