// Bad input to the Auth service on a real member: empty names, unknown roles, grants to missing
// users, revokes of what was never granted each get etcd's error (code and message) and change
// nothing (the auth revision and the user and role lists stay as they were); a 1 MiB password is
// hashed and works like any other, and a wrong one of the same size is refused.
#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;

template <typename Request, typename Response, typename Call>
grpc::Status Invoke(pb::Auth::Stub& stub, Call call, const Request& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Response response;
  return (stub.*call)(&ctx, request, &response);
}

void CheckError(const grpc::Status& s, const EtcdError& e) {
  INFO("got code " << s.error_code() << ": " << s.error_message());
  CHECK(s.error_code() == static_cast<grpc::StatusCode>(e.code));
  CHECK(s.error_message() == e.message);
}

std::uint64_t AuthRevision(pb::Auth::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::AuthStatusResponse resp;
  REQUIRE(stub.AuthStatus(&ctx, pb::AuthStatusRequest(), &resp).ok());
  return resp.authrevision();
}

std::vector<std::string> Users(pb::Auth::Stub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::AuthUserListResponse resp;
  REQUIRE(stub.UserList(&ctx, pb::AuthUserListRequest(), &resp).ok());
  return {resp.users().begin(), resp.users().end()};
}

TEST_CASE("auth bad input: etcd's errors and no change", "[integration][bad_input][auth]") {
  auto cluster = StartCluster(1);
  auto stub = pb::Auth::NewStub(cluster->Channel(0));
  pb::Auth::Stub& auth = *stub;
  using S = pb::Auth::Stub;

  pb::AuthUserAddRequest add;
  add.set_name("worker");
  add.set_password("pw");
  REQUIRE(Invoke<pb::AuthUserAddRequest, pb::AuthUserAddResponse>(auth, &S::UserAdd, add).ok());
  pb::AuthRoleAddRequest role;
  role.set_name("jobs");
  REQUIRE(Invoke<pb::AuthRoleAddRequest, pb::AuthRoleAddResponse>(auth, &S::RoleAdd, role).ok());
  const std::uint64_t revision = AuthRevision(auth);
  const std::vector<std::string> users = Users(auth);

  add.set_name("");
  CheckError(Invoke<pb::AuthUserAddRequest, pb::AuthUserAddResponse>(auth, &S::UserAdd, add),
             etcd_errors::kUserEmpty);
  add.set_name("worker");
  CheckError(Invoke<pb::AuthUserAddRequest, pb::AuthUserAddResponse>(auth, &S::UserAdd, add),
             etcd_errors::kUserAlreadyExist);
  role.set_name("");
  CheckError(Invoke<pb::AuthRoleAddRequest, pb::AuthRoleAddResponse>(auth, &S::RoleAdd, role),
             etcd_errors::kRoleEmpty);

  pb::AuthUserGrantRoleRequest grant;
  grant.set_user("ghost");
  grant.set_role("jobs");
  CheckError(Invoke<pb::AuthUserGrantRoleRequest, pb::AuthUserGrantRoleResponse>(
                 auth, &S::UserGrantRole, grant),
             etcd_errors::kUserNotFound);
  grant.set_user("worker");
  grant.set_role("nope");
  CheckError(Invoke<pb::AuthUserGrantRoleRequest, pb::AuthUserGrantRoleResponse>(
                 auth, &S::UserGrantRole, grant),
             etcd_errors::kRoleNotFound);
  grant.set_user("");
  CheckError(Invoke<pb::AuthUserGrantRoleRequest, pb::AuthUserGrantRoleResponse>(
                 auth, &S::UserGrantRole, grant),
             etcd_errors::kUserNotFound);

  pb::AuthUserRevokeRoleRequest revoke_role;
  revoke_role.set_name("worker");
  revoke_role.set_role("jobs");
  CheckError(Invoke<pb::AuthUserRevokeRoleRequest, pb::AuthUserRevokeRoleResponse>(
                 auth, &S::UserRevokeRole, revoke_role),
             etcd_errors::kRoleNotGranted);

  pb::AuthRoleGrantPermissionRequest perm;
  perm.set_name("nope");
  perm.mutable_perm()->set_key("/jobs/");
  perm.mutable_perm()->set_permtype(authpb::Permission::READ);
  CheckError(Invoke<pb::AuthRoleGrantPermissionRequest, pb::AuthRoleGrantPermissionResponse>(
                 auth, &S::RoleGrantPermission, perm),
             etcd_errors::kRoleNotFound);
  pb::AuthRoleRevokePermissionRequest revoke_perm;
  revoke_perm.set_role("jobs");
  revoke_perm.set_key("/never/");
  CheckError(Invoke<pb::AuthRoleRevokePermissionRequest, pb::AuthRoleRevokePermissionResponse>(
                 auth, &S::RoleRevokePermission, revoke_perm),
             etcd_errors::kPermissionNotGranted);

  pb::AuthUserDeleteRequest del;
  del.set_name("ghost");
  CheckError(
      Invoke<pb::AuthUserDeleteRequest, pb::AuthUserDeleteResponse>(auth, &S::UserDelete, del),
      etcd_errors::kUserNotFound);
  pb::AuthRoleDeleteRequest del_role;
  del_role.set_role("nope");
  CheckError(
      Invoke<pb::AuthRoleDeleteRequest, pb::AuthRoleDeleteResponse>(auth, &S::RoleDelete, del_role),
      etcd_errors::kRoleNotFound);
  pb::AuthUserChangePasswordRequest passwd;
  passwd.set_name("ghost");
  passwd.set_password("x");
  CheckError(Invoke<pb::AuthUserChangePasswordRequest, pb::AuthUserChangePasswordResponse>(
                 auth, &S::UserChangePassword, passwd),
             etcd_errors::kUserNotFound);

  // Nothing changed.
  CHECK(AuthRevision(auth) == revision);
  CHECK(Users(auth) == users);

  // A 1 MiB password: hashed like any other; the right one authenticates, a wrong one does not.
  const std::string big(1 << 20, 'p');
  add.set_name("big");
  add.set_password(big);
  grpc::Status added =
      Invoke<pb::AuthUserAddRequest, pb::AuthUserAddResponse>(auth, &S::UserAdd, add);
  INFO(added.error_message());
  REQUIRE(added.ok());
  EtcdctlOk(*cluster, {"user", "add", "root:rootpw"});
  EtcdctlOk(*cluster, {"auth", "enable"});
  pb::AuthenticateRequest login;
  login.set_name("big");
  login.set_password(big);
  grpc::Status in =
      Invoke<pb::AuthenticateRequest, pb::AuthenticateResponse>(auth, &S::Authenticate, login);
  INFO(in.error_message());
  CHECK(in.ok());
  login.set_password(big.substr(1) + "q");
  CheckError(
      Invoke<pb::AuthenticateRequest, pb::AuthenticateResponse>(auth, &S::Authenticate, login),
      etcd_errors::kAuthFailed);
  login.set_name("");
  CheckError(
      Invoke<pb::AuthenticateRequest, pb::AuthenticateResponse>(auth, &S::Authenticate, login),
      etcd_errors::kAuthFailed);
}

}  // namespace
}  // namespace epoch::integration
