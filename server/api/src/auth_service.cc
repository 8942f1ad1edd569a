#include "epoch/api/auth_service.h"

#include <array>
#include <asio.hpp>

#include "auth_failure_limiter.h"
#include "auth_password.h"
#include "epoch/etcd_errors.h"
#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

void FinishError(rpc::UnaryReactor* reactor, const Status& s) { reactor->Finish(ToGrpc(s)); }

}  // namespace

AuthService::AuthService(NodeContext& node, const rpc::ClientPeers& client_peers)
    : node_(node),
      client_peers_(client_peers),
      failures_(std::make_unique<AuthFailureLimiter>(node.config().auth_failure_limits)) {}

AuthService::~AuthService() = default;

template <typename Response>
void AuthService::Propose(rpc::UnaryReactor* reactor,
                          std::chrono::system_clock::time_point deadline, Internal request,
                          Response* response) {
  node_.Write(std::move(request), deadline,
              [this, reactor, response](const Status& s, const v1::InternalResponse& r) {
                if (!s.ok()) return FinishError(reactor, s);
                if constexpr (std::is_same_v<Response, pb::AuthenticateResponse>) {
                  response->set_token(r.auth().token());
                }
                node_.FillHeader(response->mutable_header());
                reactor->Finish(grpc::Status::OK);
              });
}

template <typename Response>
rpc::UnaryReactor* AuthService::AdminChange(rpc::CallContext* ctx, Internal request,
                                            Response* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  Status allowed = node_.auth().AuthorizeAdmin(*ctx, &request);
  if (!allowed.ok()) {
    FinishError(reactor, allowed);
    return reactor;
  }
  Propose(reactor, ctx->deadline(), std::move(request), response);
  return reactor;
}

template <typename Fn>
bool AuthService::Hash(Fn fn) {
  if (hashing_.fetch_add(1) >= kMaxHashing) {
    hashing_.fetch_sub(1);
    return false;
  }
  asio::post(node_.read_pool(), [this, fn = std::move(fn)]() mutable {
    fn();
    hashing_.fetch_sub(1);
  });
  return true;
}

template <typename Response, typename Read>
rpc::UnaryReactor* AuthService::AdminRead(rpc::CallContext* ctx, Response* response, Read read) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  Status allowed = node_.auth().AuthorizeAdmin(*ctx);
  if (!allowed.ok()) {
    FinishError(reactor, allowed);
    return reactor;
  }
  node_.ReadBarrier(false, [this, reactor, response, read](const Status& s) {
    if (!s.ok()) return FinishError(reactor, s);
    Status r = read(*node_.store().Auth(), response);
    if (!r.ok()) return FinishError(reactor, r);
    node_.FillHeader(response->mutable_header());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

rpc::UnaryReactor* AuthService::Authenticate(rpc::CallContext* ctx,
                                             const pb::AuthenticateRequest* request,
                                             pb::AuthenticateResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  std::string host = PeerHost(client_peers_.Resolve(ctx->peer()));
  if (!failures_->Admit(request->name(), host, AuthFailureLimiter::Clock::now())) {
    rate_limited_.fetch_add(1, std::memory_order_relaxed);
    FinishError(reactor, etcd_errors::kAuthRateLimited.ToStatus());
    return reactor;
  }
  auto check = [this, reactor, request, response, deadline = ctx->deadline(), host] {
    const bool queued =
        Hash([=, this] { CheckAndIssue(reactor, *request, response, deadline, host); });
    if (!queued) {
      failures_->Finish(request->name(), host, false, AuthFailureLimiter::Clock::now());
      FinishError(reactor, etcd_errors::kTooManyRequests.ToStatus());
    }
  };
  if (node_.auth().jwt() == nullptr) {
    check();
    return reactor;
  }
  // A signed token is issued without a log entry: its password is checked on a state at least as
  // new as a linearizable read, so a user deleted or a password changed before this call counts.
  node_.ReadBarrier(false, [this, reactor, request, host, check](const Status& s) {
    if (s.ok()) return check();
    failures_->Finish(request->name(), host, false, AuthFailureLimiter::Clock::now());
    FinishError(reactor, s);
  });
  return reactor;
}

void AuthService::CheckAndIssue(rpc::UnaryReactor* reactor, const pb::AuthenticateRequest& request,
                                pb::AuthenticateResponse* response,
                                std::chrono::system_clock::time_point deadline,
                                const std::string& host) {
  AuthStatePtr state = node_.store().Auth();
  std::optional<FailureReason> failed = CheckPassword(*state, request);
  failures_->Finish(request.name(), host, failed && *failed != FailureReason::kNotEnabled,
                    AuthFailureLimiter::Clock::now());
  if (failed) {
    failures_total_[static_cast<int>(*failed)].fetch_add(1, std::memory_order_relaxed);
    return FinishError(reactor, *failed == FailureReason::kNotEnabled
                                    ? etcd_errors::kAuthNotEnabled.ToStatus()
                                    : etcd_errors::kAuthFailed.ToStatus());
  }
  if (const JwtTokens* jwt = node_.auth().jwt()) {
    Result<std::string> token = jwt->Sign(request.name(), state->revision, UnixNowSeconds());
    if (!token.ok()) return FinishError(reactor, token.status());
    response->set_token(std::move(*token));
    node_.FillHeader(response->mutable_header());
    return reactor->Finish(grpc::Status::OK);
  }
  std::string token = AuthTokens::NewToken();
  if (token.empty()) return FinishError(reactor, Status::Unavailable("epoch: no random token"));
  Internal internal;
  v1::AuthenticateEntry* entry = internal.mutable_authenticate();
  entry->set_name(request.name());
  entry->set_token(std::move(token));
  // Apply refuses the token if the auth state changed after this check (etcd's old revision).
  entry->set_checked_revision(state->revision);
  entry->set_ttl_ms(std::chrono::milliseconds(node_.config().auth_token_ttl).count());
  Propose(reactor, deadline, std::move(internal), response);
}

std::optional<AuthService::FailureReason> AuthService::CheckPassword(
    const AuthState& state, const pb::AuthenticateRequest& request) {
  if (!state.enabled) return FailureReason::kNotEnabled;
  auto user = state.users.find(request.name());
  if (user == state.users.end()) return FailureReason::kUnknownUser;
  // A user without a password (certificate only) never authenticates with one, as etcd's.
  if (user->second.password().empty()) return FailureReason::kNoPassword;
  if (!VerifyPassword(request.password(), user->second.password())) {
    return FailureReason::kBadPassword;
  }
  return std::nullopt;
}

void AuthService::RenderMetrics(MetricsText& m) const {
  std::vector<std::pair<std::string_view, std::uint64_t>> failures;
  for (int i = 0; i < kFailureReasons; ++i) {
    failures.emplace_back(kFailureReasonNames[i],
                          failures_total_[i].load(std::memory_order_relaxed));
  }
  m.LabeledCounter("epoch_auth_failures_total",
                   "Authenticate calls refused after checking the password, by reason.", "reason",
                   failures);
  m.Counter("epoch_auth_rate_limited_total",
            "Authenticate calls refused unchecked: too many failed attempts for the user or from "
            "the client address.",
            rate_limited_.load(std::memory_order_relaxed));
  const AuthTokens::WaitCounts w = node_.auth().tokens().wait_counts();
  const std::array<std::pair<std::string_view, std::uint64_t>, 3> waits{
      {{"applied", w.applied}, {"timed_out", w.timed_out}, {"busy", w.busy}}};
  m.LabeledCounter("epoch_auth_token_waits_total",
                   "Calls whose simple token named an Authenticate entry this member had not "
                   "applied yet, by outcome: applied (the wait ended with the entry applied), "
                   "timed_out, busy (refused without waiting: too many waiters).",
                   "outcome", waits);
  // etcd's name (auth/metrics.go).
  m.Gauge("etcd_debugging_auth_revision", "The current revision of auth store.",
          node_.store().Auth()->revision);
}

rpc::UnaryReactor* AuthService::AuthStatus(rpc::CallContext* ctx,
                                           pb::AuthStatusResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  node_.ReadBarrier(false, [this, reactor, response](const Status& s) {
    if (!s.ok()) return FinishError(reactor, s);
    AuthStatePtr state = node_.store().Auth();
    response->set_enabled(state->enabled);
    response->set_authrevision(state->revision);
    node_.FillHeader(response->mutable_header());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

rpc::UnaryReactor* AuthService::UserAdd(rpc::CallContext* ctx,
                                        const pb::AuthUserAddRequest* request,
                                        pb::AuthUserAddResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  Internal internal;
  Status allowed = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (allowed.ok() && request->name().empty()) allowed = etcd_errors::kUserEmpty.ToStatus();
  if (!allowed.ok()) {
    FinishError(reactor, allowed);
    return reactor;
  }
  pb::AuthUserAddRequest* add = internal.mutable_auth_user_add();
  add->set_name(request->name());
  *add->mutable_options() = request->options();
  if (request->options().no_password()) {
    Propose(reactor, ctx->deadline(), std::move(internal), response);
    return reactor;
  }
  const auto deadline = ctx->deadline();
  const bool queued =
      Hash([this, reactor, request, response, deadline, internal = std::move(internal)]() mutable {
        Result<std::string> hash = HashPassword(request->password(), node_.config().bcrypt_cost);
        if (!hash.ok()) return FinishError(reactor, hash.status());
        internal.mutable_auth_user_add()->set_hashedpassword(std::move(*hash));
        Propose(reactor, deadline, std::move(internal), response);
      });
  if (!queued) FinishError(reactor, etcd_errors::kTooManyRequests.ToStatus());
  return reactor;
}

rpc::UnaryReactor* AuthService::UserChangePassword(rpc::CallContext* ctx,
                                                   const pb::AuthUserChangePasswordRequest* request,
                                                   pb::AuthUserChangePasswordResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  Internal internal;
  Status allowed = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (!allowed.ok()) {
    FinishError(reactor, allowed);
    return reactor;
  }
  internal.mutable_auth_user_change_password()->set_name(request->name());
  const auto deadline = ctx->deadline();
  const bool queued =
      Hash([this, reactor, request, response, deadline, internal = std::move(internal)]() mutable {
        Result<std::string> hash = HashPassword(request->password(), node_.config().bcrypt_cost);
        if (!hash.ok()) return FinishError(reactor, hash.status());
        internal.mutable_auth_user_change_password()->set_hashedpassword(std::move(*hash));
        Propose(reactor, deadline, std::move(internal), response);
      });
  if (!queued) FinishError(reactor, etcd_errors::kTooManyRequests.ToStatus());
  return reactor;
}

void AuthService::Register(rpc::Server& server) {
  using Async = pb::Auth::AsyncService;
  // Changes that carry no password: the request as the log entry, root only.
  auto change = [this](auto set) {
    return [this, set](rpc::CallContext* c, const auto* q, auto* r) {
      Internal internal;
      set(internal, *q);
      return AdminChange(c, std::move(internal), r);
    };
  };
  server.Unary(this, &Async::RequestAuthEnable,
               change([](Internal& i, const pb::AuthEnableRequest&) { i.mutable_auth_enable(); }));
  server.Unary(
      this, &Async::RequestAuthDisable,
      change([](Internal& i, const pb::AuthDisableRequest&) { i.mutable_auth_disable(); }));
  server.Unary(this, &Async::RequestUserDelete,
               change([](Internal& i, const pb::AuthUserDeleteRequest& q) {
                 *i.mutable_auth_user_delete() = q;
               }));
  server.Unary(this, &Async::RequestUserGrantRole,
               change([](Internal& i, const pb::AuthUserGrantRoleRequest& q) {
                 *i.mutable_auth_user_grant_role() = q;
               }));
  server.Unary(this, &Async::RequestUserRevokeRole,
               change([](Internal& i, const pb::AuthUserRevokeRoleRequest& q) {
                 *i.mutable_auth_user_revoke_role() = q;
               }));
  server.Unary(
      this, &Async::RequestRoleAdd,
      change([](Internal& i, const pb::AuthRoleAddRequest& q) { *i.mutable_auth_role_add() = q; }));
  server.Unary(this, &Async::RequestRoleDelete,
               change([](Internal& i, const pb::AuthRoleDeleteRequest& q) {
                 *i.mutable_auth_role_delete() = q;
               }));
  server.Unary(this, &Async::RequestRoleGrantPermission,
               change([](Internal& i, const pb::AuthRoleGrantPermissionRequest& q) {
                 *i.mutable_auth_role_grant_permission() = q;
               }));
  server.Unary(this, &Async::RequestRoleRevokePermission,
               change([](Internal& i, const pb::AuthRoleRevokePermissionRequest& q) {
                 *i.mutable_auth_role_revoke_permission() = q;
               }));
  server.Unary(
      this, &Async::RequestAuthenticate,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return Authenticate(c, q, r); });
  server.Unary(this, &Async::RequestAuthStatus,
               [this](rpc::CallContext* c, const auto*, auto* r) { return AuthStatus(c, r); });
  server.Unary(this, &Async::RequestUserAdd,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return UserAdd(c, q, r); });
  server.Unary(
      this, &Async::RequestUserChangePassword,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return UserChangePassword(c, q, r); });
  server.Unary(this, &Async::RequestUserGet, [this](rpc::CallContext* c, const auto* q, auto* r) {
    return AdminRead(c, r, [q](const AuthState& s, pb::AuthUserGetResponse* out) {
      return GetUser(s, q->name(), out);
    });
  });
  server.Unary(this, &Async::RequestUserList, [this](rpc::CallContext* c, const auto*, auto* r) {
    return AdminRead(c, r, [](const AuthState& s, pb::AuthUserListResponse* out) {
      ListUsers(s, out);
      return Status::Ok();
    });
  });
  server.Unary(this, &Async::RequestRoleGet, [this](rpc::CallContext* c, const auto* q, auto* r) {
    return AdminRead(c, r, [q](const AuthState& s, pb::AuthRoleGetResponse* out) {
      return GetRole(s, q->role(), out);
    });
  });
  server.Unary(this, &Async::RequestRoleList, [this](rpc::CallContext* c, const auto*, auto* r) {
    return AdminRead(c, r, [](const AuthState& s, pb::AuthRoleListResponse* out) {
      ListRoles(s, out);
      return Status::Ok();
    });
  });
}

}  // namespace epoch::server
