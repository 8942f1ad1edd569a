#include "epoch/node/auth_gate.h"

#include <grpcpp/security/auth_context.h>

#include <algorithm>
#include <chrono>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

// gRPC's metadata key of etcd's token (etcdserver/api/v3rpc/rpctypes.TokenFieldNameGRPC).
constexpr std::string_view kTokenMetadata = "token";

// The CN of the client certificate gRPC verified, "" without one.
std::string CertificateCommonName(const grpc::ServerContext& ctx) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return {};
  std::vector<grpc::string_ref> cn = auth->FindPropertyValues("x509_common_name");
  if (cn.empty()) return {};
  return std::string(cn.front().data(), cn.front().size());
}

// How long a call waits for this member to apply the Authenticate entry its token names: the
// call's deadline, and at most kIssuedTokenWait (a member further behind is not serving well).
constexpr auto kIssuedTokenWait = std::chrono::seconds(1);

std::chrono::steady_clock::time_point IssuedTokenDeadline(const grpc::ServerContext& ctx) {
  const auto now = std::chrono::steady_clock::now();
  const auto left = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      ctx.deadline() - std::chrono::system_clock::now());
  return now + std::clamp<std::chrono::steady_clock::duration>(left, {}, kIssuedTokenWait);
}

}  // namespace

std::int64_t UnixNowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<AuthCaller> AuthGate::Caller(const grpc::ServerContext& ctx) {
  AuthCaller caller{{}, store_.Auth()};
  if (!caller.state->enabled) return caller;
  const auto& metadata = ctx.client_metadata();
  auto token = metadata.find(grpc::string_ref(kTokenMetadata.data(), kTokenMetadata.size()));
  if (token != metadata.end()) {
    const std::string_view text(token->second.data(), token->second.size());
    if (jwt_) {
      // Its user's permissions are read from the current state below, whatever auth revision
      // the token was issued at.
      Result<JwtClaims> claims = jwt_->Verify(text, UnixNowSeconds());
      if (!claims.ok()) return claims.status();
      caller.user = std::move(claims->username);
      return caller;
    }
    std::optional<std::string> user = tokens_.Lookup(text, store_.ClusterTimeMs());
    if (!user && tokens_.WaitIssued(text, IssuedTokenDeadline(ctx))) {
      user = tokens_.Lookup(text, store_.ClusterTimeMs());
    }
    if (!user) return etcd_errors::kInvalidAuthToken.ToStatus();
    caller.user = std::move(*user);
    return caller;
  }
  if (cert_auth_) caller.user = CertificateCommonName(ctx);
  return caller;
}

}  // namespace epoch::server
