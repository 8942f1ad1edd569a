#include "epoch/state/auth_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "epoch/etcd_errors.h"
#include "key_encoding.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;
using v1::InternalRequest;

// A key interval [begin, end); no end: every key from begin on.
struct KeySpan {
  std::string begin;
  std::optional<std::string> end;
};

// etcd's encoding: range_end empty is the key alone, "\0" is every key from `key` on.
KeySpan SpanOf(std::string_view key, std::string_view range_end) {
  if (range_end.empty()) return {std::string(key), std::string(key) + '\0'};
  if (range_end == std::string_view("\0", 1)) return {std::string(key), std::nullopt};
  return {std::string(key), std::string(range_end)};
}

bool Grants(authpb::Permission::Type have, AuthAccess want) {
  if (have == authpb::Permission::READWRITE) return true;
  return want == AuthAccess::kRead ? have == authpb::Permission::READ
                                   : have == authpb::Permission::WRITE;
}

bool HasRootRole(const authpb::User& user) {
  return std::find(user.roles().begin(), user.roles().end(), kAuthRootName) != user.roles().end();
}

// Whether the union of `spans` covers `want`.
bool Covers(std::vector<KeySpan> spans, const KeySpan& want) {
  std::sort(spans.begin(), spans.end(),
            [](const KeySpan& a, const KeySpan& b) { return a.begin < b.begin; });
  std::string reached = want.begin;  // every key in [want.begin, reached) is covered
  for (const KeySpan& s : spans) {
    if (s.begin > reached) break;
    if (!s.end) return true;
    if (*s.end > reached) reached = *s.end;
    if (want.end && reached >= *want.end) return true;
  }
  return want.end && reached >= *want.end;
}

Status CheckTxnOps(const AuthState& state, std::string_view user,
                   const google::protobuf::RepeatedPtrField<pb::RequestOp>& ops) {
  for (const pb::RequestOp& op : ops) {
    Status s = Status::Ok();
    if (op.has_request_range()) s = CheckRangePermission(state, user, op.request_range());
    if (op.has_request_put()) s = CheckPutPermission(state, user, op.request_put());
    if (op.has_request_delete_range()) {
      s = CheckDeleteRangePermission(state, user, op.request_delete_range());
    }
    if (op.has_request_txn()) s = CheckTxnPermission(state, user, op.request_txn());
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status Err(const EtcdError& e) { return e.ToStatus(); }

// Copies `state` for a change; the revision moves on.
std::shared_ptr<AuthState> Changed(const AuthState& state) {
  auto next = std::make_shared<AuthState>(state);
  ++next->revision;
  return next;
}

Status ApplyEnable(const AuthStatePtr& state, AuthStatePtr* next) {
  if (state->enabled) return Status::Ok();
  auto root = state->users.find(kAuthRootName);
  if (root == state->users.end()) return Err(etcd_errors::kRootUserNotExist);
  if (!HasRootRole(root->second)) return Err(etcd_errors::kRootRoleNotExist);
  auto changed = Changed(*state);
  changed->enabled = true;
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyDisable(const AuthStatePtr& state, AuthStatePtr* next, v1::AuthResult* result) {
  if (!state->enabled) return Status::Ok();
  auto changed = Changed(*state);
  changed->enabled = false;
  *next = std::move(changed);
  result->set_drop_all_tokens(true);
  return Status::Ok();
}

Status ApplyAuthenticate(const AuthState& state, const v1::AuthenticateEntry& entry, LogIndex index,
                         std::int64_t now_ms, v1::AuthResult* result) {
  if (!state.enabled) return Err(etcd_errors::kAuthNotEnabled);
  if (!state.users.contains(entry.name())) return Err(etcd_errors::kAuthFailed);
  if (entry.checked_revision() < state.revision) return Err(etcd_errors::kAuthOldRevision);
  if (entry.token().empty() || entry.ttl_ms() <= 0) {
    return Status::InvalidArgument("epoch: an authenticate entry needs a token and a TTL");
  }
  // etcd's simple-token form "<random>.<index>": a member that has not applied the entry yet
  // knows from the token whether waiting for its log can make it valid (AuthTokens).
  result->set_token(fmt::format("{}.{}", entry.token(), index.value()));
  result->set_user(entry.name());
  result->set_expires_cluster_ms(now_ms + entry.ttl_ms());
  return Status::Ok();
}

Status ApplyUserAdd(const AuthState& state, const pb::AuthUserAddRequest& req, AuthStatePtr* next) {
  if (req.name().empty()) return Err(etcd_errors::kUserEmpty);
  if (state.users.contains(req.name())) return Err(etcd_errors::kUserAlreadyExist);
  const bool no_password = req.has_options() && req.options().no_password();
  if (!no_password && req.hashedpassword().empty()) {
    return Status::InvalidArgument("epoch: a user with a password needs its hash");
  }
  authpb::User user;
  user.set_name(req.name());
  if (!no_password) user.set_password(req.hashedpassword());
  if (req.has_options()) *user.mutable_options() = req.options();
  auto changed = Changed(state);
  changed->users.emplace(req.name(), std::move(user));
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyUserDelete(const AuthState& state, const pb::AuthUserDeleteRequest& req,
                       AuthStatePtr* next, v1::AuthResult* result) {
  if (state.enabled && req.name() == kAuthRootName) return Err(etcd_errors::kInvalidAuthMgmt);
  if (!state.users.contains(req.name())) return Err(etcd_errors::kUserNotFound);
  auto changed = Changed(state);
  changed->users.erase(req.name());
  *next = std::move(changed);
  result->set_drop_tokens_of(req.name());
  return Status::Ok();
}

Status ApplyChangePassword(const AuthState& state, const pb::AuthUserChangePasswordRequest& req,
                           AuthStatePtr* next, v1::AuthResult* result) {
  if (!state.users.contains(req.name())) return Err(etcd_errors::kUserNotFound);
  if (req.hashedpassword().empty()) {
    return Status::InvalidArgument("epoch: a password change needs the new hash");
  }
  auto changed = Changed(state);
  changed->users[req.name()].set_password(req.hashedpassword());
  *next = std::move(changed);
  result->set_drop_tokens_of(req.name());
  return Status::Ok();
}

Status ApplyGrantRole(const AuthState& state, const pb::AuthUserGrantRoleRequest& req,
                      AuthStatePtr* next) {
  auto user = state.users.find(req.user());
  if (user == state.users.end()) return Err(etcd_errors::kUserNotFound);
  if (req.role() != kAuthRootName && !state.roles.contains(req.role())) {
    return Err(etcd_errors::kRoleNotFound);
  }
  const auto& roles = user->second.roles();
  if (std::find(roles.begin(), roles.end(), req.role()) != roles.end()) return Status::Ok();
  auto changed = Changed(state);
  auto* granted = changed->users[req.user()].mutable_roles();
  granted->Add(std::string(req.role()));
  std::sort(granted->begin(), granted->end());
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyRevokeRole(const AuthState& state, const pb::AuthUserRevokeRoleRequest& req,
                       AuthStatePtr* next) {
  if (state.enabled && req.name() == kAuthRootName && req.role() == kAuthRootName) {
    return Err(etcd_errors::kInvalidAuthMgmt);
  }
  auto user = state.users.find(req.name());
  if (user == state.users.end()) return Err(etcd_errors::kUserNotFound);
  const auto& roles = user->second.roles();
  if (std::find(roles.begin(), roles.end(), req.role()) == roles.end()) {
    return Err(etcd_errors::kRoleNotGranted);
  }
  auto changed = Changed(state);
  auto* granted = changed->users[req.name()].mutable_roles();
  granted->erase(std::find(granted->begin(), granted->end(), req.role()));
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyRoleAdd(const AuthState& state, const pb::AuthRoleAddRequest& req, AuthStatePtr* next) {
  if (req.name().empty()) return Err(etcd_errors::kRoleEmpty);
  if (state.roles.contains(req.name())) return Err(etcd_errors::kRoleAlreadyExist);
  auto changed = Changed(state);
  authpb::Role role;
  role.set_name(req.name());
  changed->roles.emplace(req.name(), std::move(role));
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyRoleDelete(const AuthState& state, const pb::AuthRoleDeleteRequest& req,
                       AuthStatePtr* next) {
  if (state.enabled && req.role() == kAuthRootName) return Err(etcd_errors::kInvalidAuthMgmt);
  if (!state.roles.contains(req.role())) return Err(etcd_errors::kRoleNotFound);
  auto changed = Changed(state);
  changed->roles.erase(req.role());
  for (auto& [name, user] : changed->users) {
    auto* roles = user.mutable_roles();
    roles->erase(std::remove(roles->begin(), roles->end(), req.role()), roles->end());
  }
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyGrantPermission(const AuthState& state, const pb::AuthRoleGrantPermissionRequest& req,
                            AuthStatePtr* next) {
  if (!state.roles.contains(req.name())) return Err(etcd_errors::kRoleNotFound);
  if (!authpb::Permission::Type_IsValid(req.perm().permtype())) {
    return Status::InvalidArgument("epoch: unknown permission type");
  }
  auto changed = Changed(state);
  auto* perms = changed->roles[req.name()].mutable_keypermission();
  auto same = std::find_if(perms->begin(), perms->end(), [&](const authpb::Permission& p) {
    return p.key() == req.perm().key() && p.range_end() == req.perm().range_end();
  });
  if (same != perms->end()) {
    same->set_permtype(req.perm().permtype());
  } else {
    *perms->Add() = req.perm();
    std::sort(perms->begin(), perms->end(), [](const auto& a, const auto& b) {
      return std::tie(a.key(), a.range_end()) < std::tie(b.key(), b.range_end());
    });
  }
  *next = std::move(changed);
  return Status::Ok();
}

Status ApplyRevokePermission(const AuthState& state, const pb::AuthRoleRevokePermissionRequest& req,
                             AuthStatePtr* next) {
  auto role = state.roles.find(req.role());
  if (role == state.roles.end()) return Err(etcd_errors::kRoleNotFound);
  const auto& perms = role->second.keypermission();
  auto match = [&](const authpb::Permission& p) {
    return p.key() == req.key() && p.range_end() == req.range_end();
  };
  if (std::none_of(perms.begin(), perms.end(), match)) {
    return Err(etcd_errors::kPermissionNotGranted);
  }
  auto changed = Changed(state);
  auto* kept = changed->roles[req.role()].mutable_keypermission();
  kept->erase(std::remove_if(kept->begin(), kept->end(), match), kept->end());
  *next = std::move(changed);
  return Status::Ok();
}

}  // namespace

Status CheckKeyPermission(const AuthState& state, std::string_view user, AuthAccess access,
                          std::string_view key, std::string_view range_end) {
  if (!state.enabled) return Status::Ok();
  if (user.empty()) return Err(etcd_errors::kUserEmpty);
  auto found = state.users.find(user);
  if (found == state.users.end()) return Err(etcd_errors::kPermissionDenied);
  if (HasRootRole(found->second)) return Status::Ok();
  std::vector<KeySpan> spans;
  for (const std::string& role_name : found->second.roles()) {
    auto role = state.roles.find(role_name);
    if (role == state.roles.end()) continue;
    for (const authpb::Permission& p : role->second.keypermission()) {
      if (Grants(p.permtype(), access)) spans.push_back(SpanOf(p.key(), p.range_end()));
    }
  }
  if (Covers(std::move(spans), SpanOf(key, range_end))) return Status::Ok();
  return Err(etcd_errors::kPermissionDenied);
}

Status CheckPrefixPermission(const AuthState& state, std::string_view user, AuthAccess access,
                             std::string_view prefix) {
  std::string end = PrefixEnd(prefix);
  if (end.empty()) end.assign(1, '\0');  // no key after the prefix's keys: every key from it on
  return CheckKeyPermission(state, user, access, prefix, end);
}

Status CheckKeysPermission(const AuthState& state, std::string_view user, AuthAccess access,
                           const std::vector<std::string>& keys) {
  if (!state.enabled) return Status::Ok();
  if (user.empty()) return Err(etcd_errors::kUserEmpty);
  for (const std::string& key : keys) {
    EPOCH_RETURN_IF_ERROR(CheckKeyPermission(state, user, access, key, {}));
  }
  return Status::Ok();
}

Status CheckAdminPermission(const AuthState& state, std::string_view user) {
  if (!state.enabled) return Status::Ok();
  if (user.empty()) return Err(etcd_errors::kUserEmpty);
  auto found = state.users.find(user);
  if (found == state.users.end()) return Err(etcd_errors::kUserNotFound);
  if (!HasRootRole(found->second)) return Err(etcd_errors::kPermissionDenied);
  return Status::Ok();
}

Status CheckRangePermission(const AuthState& state, std::string_view user,
                            const pb::RangeRequest& request) {
  return CheckKeyPermission(state, user, AuthAccess::kRead, request.key(), request.range_end());
}

Status CheckPutPermission(const AuthState& state, std::string_view user,
                          const pb::PutRequest& request) {
  if (request.prev_kv()) {
    EPOCH_RETURN_IF_ERROR(CheckKeyPermission(state, user, AuthAccess::kRead, request.key(), {}));
  }
  return CheckKeyPermission(state, user, AuthAccess::kWrite, request.key(), {});
}

Status CheckDeleteRangePermission(const AuthState& state, std::string_view user,
                                  const pb::DeleteRangeRequest& request) {
  if (request.prev_kv()) {
    EPOCH_RETURN_IF_ERROR(
        CheckKeyPermission(state, user, AuthAccess::kRead, request.key(), request.range_end()));
  }
  return CheckKeyPermission(state, user, AuthAccess::kWrite, request.key(), request.range_end());
}

Status CheckTxnPermission(const AuthState& state, std::string_view user,
                          const pb::TxnRequest& request) {
  if (!state.enabled) return Status::Ok();
  for (const pb::Compare& c : request.compare()) {
    EPOCH_RETURN_IF_ERROR(
        CheckKeyPermission(state, user, AuthAccess::kRead, c.key(), c.range_end()));
  }
  EPOCH_RETURN_IF_ERROR(CheckTxnOps(state, user, request.success()));
  return CheckTxnOps(state, user, request.failure());
}

Status CheckRequestPermission(const AuthState& state, std::string_view user,
                              const InternalRequest& request) {
  if (!state.enabled) return Status::Ok();
  switch (request.request_case()) {
    case InternalRequest::kPut: return CheckPutPermission(state, user, request.put());
    case InternalRequest::kDeleteRange:
      return CheckDeleteRangePermission(state, user, request.delete_range());
    case InternalRequest::kTxn: return CheckTxnPermission(state, user, request.txn());
    case InternalRequest::kCompaction:
    case InternalRequest::kAlarm:
    case InternalRequest::kClusterTiming: return CheckAdminPermission(state, user);
    case InternalRequest::kAuthenticate: return Status::Ok();
    default: break;
  }
  if (IsAuthChange(request)) return CheckAdminPermission(state, user);
  return Status::Ok();
}

bool IsAuthChange(const InternalRequest& request) {
  switch (request.request_case()) {
    case InternalRequest::kAuthEnable:
    case InternalRequest::kAuthDisable:
    case InternalRequest::kAuthenticate:
    case InternalRequest::kAuthUserAdd:
    case InternalRequest::kAuthUserDelete:
    case InternalRequest::kAuthUserChangePassword:
    case InternalRequest::kAuthUserGrantRole:
    case InternalRequest::kAuthUserRevokeRole:
    case InternalRequest::kAuthRoleAdd:
    case InternalRequest::kAuthRoleDelete:
    case InternalRequest::kAuthRoleGrantPermission:
    case InternalRequest::kAuthRoleRevokePermission: return true;
    default: return false;
  }
}

Status ApplyAuthChange(const AuthStatePtr& state, const InternalRequest& request, LogIndex index,
                       std::int64_t now_cluster_ms, AuthStatePtr* next, v1::AuthResult* result) {
  *next = state;
  const AuthState& s = *state;
  switch (request.request_case()) {
    case InternalRequest::kAuthEnable: return ApplyEnable(state, next);
    case InternalRequest::kAuthDisable: return ApplyDisable(state, next, result);
    case InternalRequest::kAuthenticate:
      return ApplyAuthenticate(s, request.authenticate(), index, now_cluster_ms, result);
    case InternalRequest::kAuthUserAdd: return ApplyUserAdd(s, request.auth_user_add(), next);
    case InternalRequest::kAuthUserDelete:
      return ApplyUserDelete(s, request.auth_user_delete(), next, result);
    case InternalRequest::kAuthUserChangePassword:
      return ApplyChangePassword(s, request.auth_user_change_password(), next, result);
    case InternalRequest::kAuthUserGrantRole:
      return ApplyGrantRole(s, request.auth_user_grant_role(), next);
    case InternalRequest::kAuthUserRevokeRole:
      return ApplyRevokeRole(s, request.auth_user_revoke_role(), next);
    case InternalRequest::kAuthRoleAdd: return ApplyRoleAdd(s, request.auth_role_add(), next);
    case InternalRequest::kAuthRoleDelete:
      return ApplyRoleDelete(s, request.auth_role_delete(), next);
    case InternalRequest::kAuthRoleGrantPermission:
      return ApplyGrantPermission(s, request.auth_role_grant_permission(), next);
    case InternalRequest::kAuthRoleRevokePermission:
      return ApplyRevokePermission(s, request.auth_role_revoke_permission(), next);
    default: break;
  }
  return Status::InvalidArgument("not an auth change");
}

v1::StoredAuth ToStoredAuth(const AuthState& state) {
  v1::StoredAuth stored;
  stored.set_enabled(state.enabled);
  stored.set_revision(state.revision);
  for (const auto& [name, user] : state.users) *stored.add_users() = user;
  for (const auto& [name, role] : state.roles) *stored.add_roles() = role;
  return stored;
}

AuthState FromStoredAuth(const v1::StoredAuth& stored) {
  AuthState state;
  state.enabled = stored.enabled();
  state.revision = stored.revision();
  for (const authpb::User& u : stored.users()) state.users.emplace(u.name(), u);
  for (const authpb::Role& r : stored.roles()) state.roles.emplace(r.name(), r);
  return state;
}

Status GetUser(const AuthState& state, std::string_view name, pb::AuthUserGetResponse* response) {
  auto found = state.users.find(name);
  if (found == state.users.end()) return Err(etcd_errors::kUserNotFound);
  for (const std::string& role : found->second.roles()) response->add_roles(role);
  return Status::Ok();
}

void ListUsers(const AuthState& state, pb::AuthUserListResponse* response) {
  for (const auto& [name, user] : state.users) response->add_users(name);
}

Status GetRole(const AuthState& state, std::string_view name, pb::AuthRoleGetResponse* response) {
  auto found = state.roles.find(name);
  if (found == state.roles.end()) return Err(etcd_errors::kRoleNotFound);
  for (const authpb::Permission& p : found->second.keypermission()) *response->add_perm() = p;
  return Status::Ok();
}

void ListRoles(const AuthState& state, pb::AuthRoleListResponse* response) {
  for (const auto& [name, role] : state.roles) response->add_roles(name);
}

}  // namespace epoch::server
