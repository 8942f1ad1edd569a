// The auth state of etcd's v3 Auth service: users, roles and their key permissions, the enabled
// flag and the auth revision; the rules that change it (etcd's auth store) and the permission
// checks that read it (etcd's isOpPermitted / IsAdminPermitted and its range permission cache).
//
// Replicated: every change is an InternalRequest (auth_enable ... auth_role_revoke_permission,
// authenticate) applied by every member in log order, and the state is stored in the meta record
// `m auth` (KvStore::Meta::auth), so checkpoints and snapshots carry it. Every successful change
// adds 1 to the revision; a request checked against an older revision is checked again at apply
// (CheckRequestPermission). Passwords reach this layer as hashes only (server/api hashes them).
//
// Thread-safety: an AuthState is immutable once published (shared as AuthStatePtr); the
// functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "authpb/auth.pb.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

inline constexpr std::string_view kAuthRootName = "root";

struct AuthState {
  bool enabled = false;
  std::uint64_t revision = 1;
  std::map<std::string, authpb::User, std::less<>> users;
  std::map<std::string, authpb::Role, std::less<>> roles;
};
using AuthStatePtr = std::shared_ptr<const AuthState>;

enum class AuthAccess { kRead, kWrite };

// etcd's isOpPermitted for the keys [key, range_end) (range_end empty: the key alone; "\0": every
// key from `key` on): OK when auth is off, the user has the root role, or the union of the user's
// roles' permissions of that kind covers the whole range. An empty user is etcd's "user name is
// empty"; an unknown user or an uncovered range "permission denied".
Status CheckKeyPermission(const AuthState& state, std::string_view user, AuthAccess access,
                          std::string_view key, std::string_view range_end);
// Every key under `prefix` (etcd's WithPrefix range): the Lock and Election recipes' names.
Status CheckPrefixPermission(const AuthState& state, std::string_view user, AuthAccess access,
                             std::string_view prefix);
// Each of `keys` alone: the keys attached to a lease (etcd's LeaseRevoke needs write on every one,
// LeaseTimeToLive with keys read on every one).
Status CheckKeysPermission(const AuthState& state, std::string_view user, AuthAccess access,
                           const std::vector<std::string>& keys);
// etcd's IsAdminPermitted: OK when auth is off or the user has the root role.
Status CheckAdminPermission(const AuthState& state, std::string_view user);

Status CheckRangePermission(const AuthState& state, std::string_view user,
                            const etcdserverpb::RangeRequest& request);
Status CheckPutPermission(const AuthState& state, std::string_view user,
                          const etcdserverpb::PutRequest& request);
Status CheckDeleteRangePermission(const AuthState& state, std::string_view user,
                                  const etcdserverpb::DeleteRangeRequest& request);
// Every compare (read), every request op and nested txn, both branches.
Status CheckTxnPermission(const AuthState& state, std::string_view user,
                          const etcdserverpb::TxnRequest& request);
// The permission an InternalRequest needs from its proposer: key permissions for KV requests,
// admin for compaction, alarms and auth changes; none for the server's own requests (clock,
// lease grant, renewals, member attributes, authenticate). A lease revoke needs the lease's keys,
// which this function does not read: apply checks a stamped revoke on its keys every time
// (attachments change without the auth revision moving), so OK here.
Status CheckRequestPermission(const AuthState& state, std::string_view user,
                              const v1::InternalRequest& request);

// Whether `request` is one of the Auth service's changes (auth_enable ... authenticate).
[[nodiscard]] bool IsAuthChange(const v1::InternalRequest& request);

// Applies an auth change to `state` with etcd's rules and errors: on success `*next` is the new
// state (the same pointer for a change that changes nothing, as etcd ignores a role granted
// twice) and `*result` says what it did; on a request error nothing is changed. `index` is the
// entry's log index: an Authenticate's token is its entry's token followed by ".<index>", as
// etcd's simple tokens.
Status ApplyAuthChange(const AuthStatePtr& state, const v1::InternalRequest& request,
                       LogIndex index, std::int64_t now_cluster_ms, AuthStatePtr* next,
                       v1::AuthResult* result);

// The stored form (`m auth`) and back.
[[nodiscard]] v1::StoredAuth ToStoredAuth(const AuthState& state);
[[nodiscard]] AuthState FromStoredAuth(const v1::StoredAuth& stored);

// Read-only Auth RPCs on a state (etcd's UserGet, UserList, RoleGet, RoleList).
Status GetUser(const AuthState& state, std::string_view name,
               etcdserverpb::AuthUserGetResponse* response);
void ListUsers(const AuthState& state, etcdserverpb::AuthUserListResponse* response);
Status GetRole(const AuthState& state, std::string_view name,
               etcdserverpb::AuthRoleGetResponse* response);
void ListRoles(const AuthState& state, etcdserverpb::AuthRoleListResponse* response);

}  // namespace epoch::server
