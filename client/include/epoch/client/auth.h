// The etcd v3 Auth service's administration calls (all of its RPCs but Authenticate, which the
// Client makes itself: client.h): enabling auth, users, roles and their key permissions. Used by
// epochctl's `auth`, `user` and `role` commands; built on Client::Channel() like admin.h, and
// carrying the Client's token. While auth is on, only root may call them (AuthStatus: anyone).
//
// Endpoint choice and retries as admin.h: reads (AuthStatus, UserGet, UserList, RoleGet, RoleList)
// move to the next endpoint after a transient failure; changes are sent again only when the
// server provably did not act on them, else they fail with OutcomeUnknown (errors.h).
//
// Threading: like Client — any thread; each call is independent.
#pragma once

#include <string>

#include "epoch/client/client.h"
#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::client {

Result<etcdserverpb::AuthEnableResponse> AuthEnable(Client& client, const CallOptions& call = {});
Result<etcdserverpb::AuthDisableResponse> AuthDisable(Client& client, const CallOptions& call = {});
Result<etcdserverpb::AuthStatusResponse> AuthStatus(Client& client, const CallOptions& call = {});

// `request.options().no_password()`: a user that only a client certificate (CN) identifies.
Result<etcdserverpb::AuthUserAddResponse> UserAdd(Client& client,
                                                  const etcdserverpb::AuthUserAddRequest& request,
                                                  const CallOptions& call = {});
Result<etcdserverpb::AuthUserGetResponse> UserGet(Client& client, const std::string& name,
                                                  const CallOptions& call = {});
Result<etcdserverpb::AuthUserListResponse> UserList(Client& client, const CallOptions& call = {});
Result<etcdserverpb::AuthUserDeleteResponse> UserDelete(Client& client, const std::string& name,
                                                        const CallOptions& call = {});
Result<etcdserverpb::AuthUserChangePasswordResponse> UserChangePassword(
    Client& client, const std::string& name, const std::string& password,
    const CallOptions& call = {});
Result<etcdserverpb::AuthUserGrantRoleResponse> UserGrantRole(Client& client,
                                                              const std::string& user,
                                                              const std::string& role,
                                                              const CallOptions& call = {});
Result<etcdserverpb::AuthUserRevokeRoleResponse> UserRevokeRole(Client& client,
                                                                const std::string& user,
                                                                const std::string& role,
                                                                const CallOptions& call = {});

Result<etcdserverpb::AuthRoleAddResponse> RoleAdd(Client& client, const std::string& name,
                                                  const CallOptions& call = {});
Result<etcdserverpb::AuthRoleGetResponse> RoleGet(Client& client, const std::string& name,
                                                  const CallOptions& call = {});
Result<etcdserverpb::AuthRoleListResponse> RoleList(Client& client, const CallOptions& call = {});
Result<etcdserverpb::AuthRoleDeleteResponse> RoleDelete(Client& client, const std::string& name,
                                                        const CallOptions& call = {});
// `perm`: type READ, WRITE or READWRITE on [key, range_end) (empty range_end: the key alone;
// "\0": every key from `key` on).
Result<etcdserverpb::AuthRoleGrantPermissionResponse> RoleGrantPermission(
    Client& client, const std::string& role, const authpb::Permission& perm,
    const CallOptions& call = {});
Result<etcdserverpb::AuthRoleRevokePermissionResponse> RoleRevokePermission(
    Client& client, const std::string& role, const std::string& key, const std::string& range_end,
    const CallOptions& call = {});

}  // namespace epoch::client
