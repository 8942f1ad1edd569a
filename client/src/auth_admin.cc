// The Auth service's administration calls over admin_call.h; see auth.h for the contract.
#include <utility>

#include "admin_call.h"
#include "epoch/client/auth.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::client {

namespace pb = etcdserverpb;
namespace {

using Stub = pb::Auth::Stub;

// One Auth RPC: `method` is the stub's synchronous method for Request -> Response.
template <typename Response, typename Request>
Result<Response> AuthCall(Client& client, std::string_view what, bool read, const Request& request,
                          const CallOptions& call,
                          grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                       Response*)) {
  Response response;
  Status status = internal::CallAdmin(
      client, what, read, call,
      [&](std::shared_ptr<grpc::Channel> channel, grpc::ClientContext* context) {
        auto stub = pb::Auth::NewStub(std::move(channel));
        return (stub.get()->*method)(context, request, &response);
      });
  if (!status.ok()) return status;
  return response;
}

constexpr bool kRead = true;
constexpr bool kChange = false;

}  // namespace

Result<pb::AuthEnableResponse> AuthEnable(Client& client, const CallOptions& call) {
  return AuthCall(client, "AuthEnable", kChange, pb::AuthEnableRequest(), call, &Stub::AuthEnable);
}

Result<pb::AuthDisableResponse> AuthDisable(Client& client, const CallOptions& call) {
  return AuthCall(client, "AuthDisable", kChange, pb::AuthDisableRequest(), call,
                  &Stub::AuthDisable);
}

Result<pb::AuthStatusResponse> AuthStatus(Client& client, const CallOptions& call) {
  return AuthCall(client, "AuthStatus", kRead, pb::AuthStatusRequest(), call, &Stub::AuthStatus);
}

Result<pb::AuthUserAddResponse> UserAdd(Client& client, const pb::AuthUserAddRequest& request,
                                        const CallOptions& call) {
  return AuthCall(client, "UserAdd", kChange, request, call, &Stub::UserAdd);
}

Result<pb::AuthUserGetResponse> UserGet(Client& client, const std::string& name,
                                        const CallOptions& call) {
  pb::AuthUserGetRequest request;
  request.set_name(name);
  return AuthCall(client, "UserGet", kRead, request, call, &Stub::UserGet);
}

Result<pb::AuthUserListResponse> UserList(Client& client, const CallOptions& call) {
  return AuthCall(client, "UserList", kRead, pb::AuthUserListRequest(), call, &Stub::UserList);
}

Result<pb::AuthUserDeleteResponse> UserDelete(Client& client, const std::string& name,
                                              const CallOptions& call) {
  pb::AuthUserDeleteRequest request;
  request.set_name(name);
  return AuthCall(client, "UserDelete", kChange, request, call, &Stub::UserDelete);
}

Result<pb::AuthUserChangePasswordResponse> UserChangePassword(Client& client,
                                                              const std::string& name,
                                                              const std::string& password,
                                                              const CallOptions& call) {
  pb::AuthUserChangePasswordRequest request;
  request.set_name(name);
  request.set_password(password);
  return AuthCall(client, "UserChangePassword", kChange, request, call, &Stub::UserChangePassword);
}

Result<pb::AuthUserGrantRoleResponse> UserGrantRole(Client& client, const std::string& user,
                                                    const std::string& role,
                                                    const CallOptions& call) {
  pb::AuthUserGrantRoleRequest request;
  request.set_user(user);
  request.set_role(role);
  return AuthCall(client, "UserGrantRole", kChange, request, call, &Stub::UserGrantRole);
}

Result<pb::AuthUserRevokeRoleResponse> UserRevokeRole(Client& client, const std::string& user,
                                                      const std::string& role,
                                                      const CallOptions& call) {
  pb::AuthUserRevokeRoleRequest request;
  request.set_name(user);
  request.set_role(role);
  return AuthCall(client, "UserRevokeRole", kChange, request, call, &Stub::UserRevokeRole);
}

Result<pb::AuthRoleAddResponse> RoleAdd(Client& client, const std::string& name,
                                        const CallOptions& call) {
  pb::AuthRoleAddRequest request;
  request.set_name(name);
  return AuthCall(client, "RoleAdd", kChange, request, call, &Stub::RoleAdd);
}

Result<pb::AuthRoleGetResponse> RoleGet(Client& client, const std::string& name,
                                        const CallOptions& call) {
  pb::AuthRoleGetRequest request;
  request.set_role(name);
  return AuthCall(client, "RoleGet", kRead, request, call, &Stub::RoleGet);
}

Result<pb::AuthRoleListResponse> RoleList(Client& client, const CallOptions& call) {
  return AuthCall(client, "RoleList", kRead, pb::AuthRoleListRequest(), call, &Stub::RoleList);
}

Result<pb::AuthRoleDeleteResponse> RoleDelete(Client& client, const std::string& name,
                                              const CallOptions& call) {
  pb::AuthRoleDeleteRequest request;
  request.set_role(name);
  return AuthCall(client, "RoleDelete", kChange, request, call, &Stub::RoleDelete);
}

Result<pb::AuthRoleGrantPermissionResponse> RoleGrantPermission(Client& client,
                                                                const std::string& role,
                                                                const authpb::Permission& perm,
                                                                const CallOptions& call) {
  pb::AuthRoleGrantPermissionRequest request;
  request.set_name(role);
  *request.mutable_perm() = perm;
  return AuthCall(client, "RoleGrantPermission", kChange, request, call,
                  &Stub::RoleGrantPermission);
}

Result<pb::AuthRoleRevokePermissionResponse> RoleRevokePermission(Client& client,
                                                                  const std::string& role,
                                                                  const std::string& key,
                                                                  const std::string& range_end,
                                                                  const CallOptions& call) {
  pb::AuthRoleRevokePermissionRequest request;
  request.set_role(role);
  request.set_key(key);
  request.set_range_end(range_end);
  return AuthCall(client, "RoleRevokePermission", kChange, request, call,
                  &Stub::RoleRevokePermission);
}

}  // namespace epoch::client
