// AuthGate: who calls, and whether they may (etcd's AuthInfoFromCtx and permission checks), for
// every service of a node. The caller is the user named by the request's token (gRPC metadata
// "token", as etcd's clients send it): a simple token (epoch/node/auth_tokens.h) or, under
// --auth-token jwt, a signed one (epoch/node/jwt_tokens.h); else, with
// --client-cert-auth, the CN of the client certificate gRPC verified, else nobody. The check
// runs against the applied auth state (epoch/state/auth_state.h) before a request is proposed;
// a proposed request is stamped with the user and the auth revision it was checked against, so
// that apply checks it again if the state has changed since.
//
// Threading: any thread; reads the store's auth state and the token table (short mutexes).
#pragma once

#include <grpcpp/server_context.h>

#include <memory>
#include <string>

#include "epoch/node/auth_tokens.h"
#include "epoch/node/jwt_tokens.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/kv_store.h"
#include "epoch/status.h"

namespace epoch::server {

// Wall-clock seconds since the Unix epoch: a JWT's exp is on this clock, as etcd's.
[[nodiscard]] std::int64_t UnixNowSeconds();

struct AuthCaller {
  std::string user;  // empty: no credentials, or auth is off
  AuthStatePtr state;
};

class AuthGate {
 public:
  // `token_ttl_ms`: --auth-token-ttl, how long a simple token lives after its last use.
  // `jwt`: the signed tokens of --auth-token jwt; null for simple tokens.
  AuthGate(KvStore& store, bool client_cert_auth, std::int64_t token_ttl_ms,
           std::unique_ptr<JwtTokens> jwt)
      : store_(store), cert_auth_(client_cert_auth), tokens_(token_ttl_ms), jwt_(std::move(jwt)) {}

  // The caller of `ctx` on the current auth state. etcd's "invalid auth token" for a token that
  // is unknown or expired while auth is on (a known token is renewed: AuthTokens::Lookup);
  // tokens are ignored while auth is off.
  Result<AuthCaller> Caller(const grpc::ServerContext& ctx);

  // Runs `check(state, user)` for the caller of `ctx`; on success stamps `stamp` (when given)
  // with the user and the auth revision.
  template <typename Check>
  Status Authorize(const grpc::ServerContext& ctx, Check check,
                   v1::InternalRequest* stamp = nullptr) {
    Result<AuthCaller> caller = Caller(ctx);
    if (!caller.ok()) return caller.status();
    EPOCH_RETURN_IF_ERROR(check(*caller->state, caller->user));
    if (stamp != nullptr) {
      stamp->set_auth_user(caller->user);
      stamp->set_auth_revision(caller->state->revision);
    }
    return Status::Ok();
  }
  // Root only (etcd's IsAdminPermitted), for maintenance and auth administration.
  Status AuthorizeAdmin(const grpc::ServerContext& ctx, v1::InternalRequest* stamp = nullptr) {
    return Authorize(ctx, CheckAdminPermission, stamp);
  }

  [[nodiscard]] AuthTokens& tokens() { return tokens_; }
  // The signer of --auth-token jwt; null with simple tokens.
  [[nodiscard]] const JwtTokens* jwt() const { return jwt_.get(); }
  [[nodiscard]] const AuthTokens& tokens() const { return tokens_; }

 private:
  KvStore& store_;
  const bool cert_auth_;
  AuthTokens tokens_;
  const std::unique_ptr<JwtTokens> jwt_;
};

}  // namespace epoch::server
