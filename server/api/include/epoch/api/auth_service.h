// AuthService: etcdserverpb.Auth, etcd's users, roles and permissions (epoch/state/auth_state.h
// for the rules and errors). Changes go through the log stamped with the caller (root only while
// auth is on, as etcd's); reads (AuthStatus, UserGet/List, RoleGet/List) are linearizable reads of
// the applied state. Passwords are hashed (auth_password.h) on the read pool, never on a gRPC or
// the Raft thread, and only the hash enters the log. Authenticate checks the password the same
// way, then proposes the new token so that every member knows it (epoch/node/auth_tokens.h).
// Failed attempts are limited per user and per client address (src/auth_failure_limiter.h):
// past the limit Authenticate answers RESOURCE_EXHAUSTED "epoch: too many failed
// authentication attempts" without checking the password.
//
// Threading: handlers on epoch-grpc; hashing on the read pool; answers where they land.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <optional>
#include <string_view>

#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/rpc/client_peers.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class AuthFailureLimiter;

class AuthService final : public etcdserverpb::Auth::AsyncService {
 public:
  // Password hashes running at once, at most; past it a call is refused with etcd's "too many
  // requests" (each costs tens of milliseconds of CPU).
  static constexpr int kMaxHashing = 8;

  // `client_peers` names the clients of connections gRPC knows by descriptor (failed Authenticate
  // calls are limited per client host).
  AuthService(NodeContext& node, const rpc::ClientPeers& client_peers);
  ~AuthService();

  // epoch_auth_failures_total{reason}, epoch_auth_rate_limited_total and etcd's
  // etcd_debugging_auth_revision.
  void RenderMetrics(MetricsText& m) const;
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

 private:
  using Internal = v1::InternalRequest;
  // Proposes `request` for a caller with root permission and finishes with an empty response
  // but its header (the token too for Authenticate).
  template <typename Response>
  void Propose(rpc::UnaryReactor* reactor, std::chrono::system_clock::time_point deadline,
               Internal request, Response* response);
  template <typename Response>
  rpc::UnaryReactor* AdminChange(rpc::CallContext* ctx, Internal request, Response* response);
  // Runs `fn` on the read pool unless kMaxHashing hashes are already running.
  template <typename Fn>
  bool Hash(Fn fn);

  rpc::UnaryReactor* Authenticate(rpc::CallContext* ctx,
                                  const etcdserverpb::AuthenticateRequest* request,
                                  etcdserverpb::AuthenticateResponse* response);
  rpc::UnaryReactor* AuthStatus(rpc::CallContext* ctx, etcdserverpb::AuthStatusResponse* response);
  rpc::UnaryReactor* UserAdd(rpc::CallContext* ctx, const etcdserverpb::AuthUserAddRequest* request,
                             etcdserverpb::AuthUserAddResponse* response);
  rpc::UnaryReactor* UserChangePassword(rpc::CallContext* ctx,
                                        const etcdserverpb::AuthUserChangePasswordRequest* request,
                                        etcdserverpb::AuthUserChangePasswordResponse* response);
  // UserGet, UserList, RoleGet, RoleList: `read(state, response)` after a linearizable barrier.
  template <typename Response, typename Read>
  rpc::UnaryReactor* AdminRead(rpc::CallContext* ctx, Response* response, Read read);

  // Why an Authenticate was refused after its password was looked at.
  enum class FailureReason { kUnknownUser, kBadPassword, kNoPassword, kNotEnabled };
  static constexpr int kFailureReasons = 4;
  static constexpr std::array<std::string_view, kFailureReasons> kFailureReasonNames = {
      "unknown_user", "bad_password", "no_password", "auth_not_enabled"};
  // The reason `request` may not have a token on `state`, nullopt when its password matches
  // (slow: on the read pool).
  static std::optional<FailureReason> CheckPassword(
      const AuthState& state, const etcdserverpb::AuthenticateRequest& request);
  // On the read pool: checks the password, then issues a token (signed here, or a simple one
  // proposed so that every member knows it) or finishes with the failure.
  void CheckAndIssue(rpc::UnaryReactor* reactor, const etcdserverpb::AuthenticateRequest& request,
                     etcdserverpb::AuthenticateResponse* response,
                     std::chrono::system_clock::time_point deadline, const std::string& host);

  NodeContext& node_;
  const rpc::ClientPeers& client_peers_;
  std::atomic<int> hashing_{0};
  std::unique_ptr<AuthFailureLimiter> failures_;  // per user and client address
  std::array<std::atomic<std::uint64_t>, kFailureReasons> failures_total_{};
  std::atomic<std::uint64_t> rate_limited_{0};
};

}  // namespace epoch::server
