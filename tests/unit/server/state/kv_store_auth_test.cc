// The auth state in the state machine: etcd's rules and errors for users, roles and permissions,
// the revision, the permission checks (ranges covered by a union of grants), the re-check at
// apply of a request checked against an older revision, and the state surviving a reopen and a
// snapshot image.
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "epoch/state/auth_state.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

v1::InternalRequest UserAdd(const std::string& name, bool no_password = false) {
  v1::InternalRequest r;
  r.mutable_auth_user_add()->set_name(name);
  if (no_password) {
    r.mutable_auth_user_add()->mutable_options()->set_no_password(true);
  } else {
    r.mutable_auth_user_add()->set_hashedpassword("$hash-of-" + name);
  }
  return r;
}

v1::InternalRequest RoleAdd(const std::string& name) {
  v1::InternalRequest r;
  r.mutable_auth_role_add()->set_name(name);
  return r;
}

v1::InternalRequest Grant(const std::string& user, const std::string& role) {
  v1::InternalRequest r;
  r.mutable_auth_user_grant_role()->set_user(user);
  r.mutable_auth_user_grant_role()->set_role(role);
  return r;
}

v1::InternalRequest GrantPerm(const std::string& role, authpb::Permission::Type type,
                              const std::string& key, const std::string& end) {
  v1::InternalRequest r;
  r.mutable_auth_role_grant_permission()->set_name(role);
  authpb::Permission* p = r.mutable_auth_role_grant_permission()->mutable_perm();
  p->set_permtype(type);
  p->set_key(key);
  p->set_range_end(end);
  return r;
}

v1::InternalRequest Enable() {
  v1::InternalRequest r;
  r.mutable_auth_enable();
  return r;
}

bool Is(const Status& s, const EtcdError& e) { return s.Is(e.id); }

TEST_CASE("auth: enable needs the root user with the root role", "[server][auth]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(Is(s.Apply(Enable()).status, etcd_errors::kRootUserNotExist));
  REQUIRE(s.Apply(UserAdd("root")).status.ok());
  CHECK(Is(s.Apply(Enable()).status, etcd_errors::kRootRoleNotExist));
  CHECK(Is(s.Apply(Grant("root", "nope")).status, etcd_errors::kRoleNotFound));
  REQUIRE(s.Apply(Grant("root", "root")).status.ok());
  const std::uint64_t before = s->Auth()->revision;
  REQUIRE(s.Apply(Enable()).status.ok());
  CHECK(s->Auth()->enabled);
  CHECK(s->Auth()->revision == before + 1);
  CHECK(s->CurrentRevision() == Revision(1));  // the key space did not move

  // While on: root cannot be deleted, nor lose the root role.
  v1::InternalRequest del;
  del.mutable_auth_user_delete()->set_name("root");
  CHECK(Is(s.Apply(del).status, etcd_errors::kInvalidAuthMgmt));
  v1::InternalRequest revoke;
  revoke.mutable_auth_user_revoke_role()->set_name("root");
  revoke.mutable_auth_user_revoke_role()->set_role("root");
  CHECK(Is(s.Apply(revoke).status, etcd_errors::kInvalidAuthMgmt));
  CHECK(s->Auth()->users.contains("root"));
}

TEST_CASE("auth: users and roles with etcd's errors", "[server][auth]") {
  TempDir dir;
  TestStore s(dir.path());
  CHECK(Is(s.Apply(UserAdd("")).status, etcd_errors::kUserEmpty));
  REQUIRE(s.Apply(UserAdd("alice")).status.ok());
  CHECK(Is(s.Apply(UserAdd("alice")).status, etcd_errors::kUserAlreadyExist));
  CHECK(Is(s.Apply(RoleAdd("")).status, etcd_errors::kRoleEmpty));
  REQUIRE(s.Apply(RoleAdd("jobs")).status.ok());
  CHECK(Is(s.Apply(RoleAdd("jobs")).status, etcd_errors::kRoleAlreadyExist));
  CHECK(Is(s.Apply(Grant("bob", "jobs")).status, etcd_errors::kUserNotFound));
  REQUIRE(s.Apply(Grant("alice", "jobs")).status.ok());
  const std::uint64_t rev = s->Auth()->revision;
  REQUIRE(s.Apply(Grant("alice", "jobs")).status.ok());  // granted twice: ignored, as etcd's
  CHECK(s->Auth()->revision == rev);

  v1::InternalRequest revoke;
  revoke.mutable_auth_user_revoke_role()->set_name("alice");
  revoke.mutable_auth_user_revoke_role()->set_role("other");
  CHECK(Is(s.Apply(revoke).status, etcd_errors::kRoleNotGranted));

  v1::InternalRequest revoke_perm;
  revoke_perm.mutable_auth_role_revoke_permission()->set_role("jobs");
  revoke_perm.mutable_auth_role_revoke_permission()->set_key("/q/");
  CHECK(Is(s.Apply(revoke_perm).status, etcd_errors::kPermissionNotGranted));
  REQUIRE(s.Apply(GrantPerm("jobs", authpb::Permission::READ, "/q/", "")).status.ok());
  REQUIRE(s.Apply(GrantPerm("jobs", authpb::Permission::READWRITE, "/q/", "")).status.ok());
  REQUIRE(s->Auth()->roles.at("jobs").keypermission_size() == 1);  // updated in place
  CHECK(s->Auth()->roles.at("jobs").keypermission(0).permtype() == authpb::Permission::READWRITE);
  REQUIRE(s.Apply(revoke_perm).status.ok());
  CHECK(s->Auth()->roles.at("jobs").keypermission_size() == 0);

  // Deleting a role takes it from its users.
  v1::InternalRequest del_role;
  del_role.mutable_auth_role_delete()->set_role("jobs");
  REQUIRE(s.Apply(del_role).status.ok());
  CHECK(s->Auth()->users.at("alice").roles_size() == 0);
  CHECK(Is(s.Apply(del_role).status, etcd_errors::kRoleNotFound));

  etcdserverpb::AuthUserGetResponse got;
  CHECK(Is(GetUser(*s->Auth(), "nobody", &got), etcd_errors::kUserNotFound));
  etcdserverpb::AuthUserListResponse list;
  ListUsers(*s->Auth(), &list);
  CHECK(list.users_size() == 1);
}

TEST_CASE("auth: a user's permissions cover a key or a range by their union", "[server][auth]") {
  AuthState a;
  a.enabled = true;
  authpb::User u;
  u.set_name("w");
  u.add_roles("r1");
  u.add_roles("r2");
  a.users["w"] = u;
  authpb::Role r1;
  r1.set_name("r1");
  auto* p = r1.add_keypermission();
  p->set_permtype(authpb::Permission::READWRITE);
  p->set_key("/a/");
  p->set_range_end("/a0");  // prefix /a/
  a.roles["r1"] = r1;
  authpb::Role r2;
  r2.set_name("r2");
  p = r2.add_keypermission();
  p->set_permtype(authpb::Permission::READ);
  p->set_key("/a0");
  p->set_range_end("/b");
  p = r2.add_keypermission();
  p->set_permtype(authpb::Permission::WRITE);
  p->set_key("solo");
  a.roles["r2"] = r2;

  const AuthAccess R = AuthAccess::kRead;
  const AuthAccess W = AuthAccess::kWrite;
  CHECK(CheckKeyPermission(a, "w", R, "/a/x", "").ok());
  CHECK(CheckKeyPermission(a, "w", W, "/a/x", "").ok());
  CHECK(CheckKeyPermission(a, "w", R, "/a/", "/a0").ok());
  CHECK(CheckKeyPermission(a, "w", R, "/a/", "/b").ok());  // two grants, joined
  CHECK(Is(CheckKeyPermission(a, "w", W, "/a/", "/b"), etcd_errors::kPermissionDenied));
  CHECK(Is(CheckKeyPermission(a, "w", R, "/a/", "/c"), etcd_errors::kPermissionDenied));
  CHECK(Is(CheckKeyPermission(a, "w", R, "/a/", std::string(1, '\0')),
           etcd_errors::kPermissionDenied));
  CHECK(CheckKeyPermission(a, "w", W, "solo", "").ok());
  CHECK(Is(CheckKeyPermission(a, "w", R, "solo", ""), etcd_errors::kPermissionDenied));
  CHECK(Is(CheckKeyPermission(a, "w", W, "solo2", ""), etcd_errors::kPermissionDenied));
  CHECK(Is(CheckKeyPermission(a, "", R, "/a/x", ""), etcd_errors::kUserEmpty));
  CHECK(Is(CheckKeyPermission(a, "ghost", R, "/a/x", ""), etcd_errors::kPermissionDenied));
  CHECK(Is(CheckAdminPermission(a, "w"), etcd_errors::kPermissionDenied));

  // A txn: every compare and every op of both branches, nested too.
  etcdserverpb::TxnRequest txn;
  txn.add_compare()->set_key("/a/x");
  txn.add_success()->mutable_request_put()->set_key("/a/y");
  auto* nested = txn.add_failure()->mutable_request_txn();
  nested->add_success()->mutable_request_range()->set_key("/a0z");
  CHECK(CheckTxnPermission(a, "w", txn).ok());
  nested->add_failure()->mutable_request_delete_range()->set_key("/a0z");
  CHECK(Is(CheckTxnPermission(a, "w", txn), etcd_errors::kPermissionDenied));

  // Root may do anything; nothing is checked while auth is off.
  u.add_roles("root");
  a.users["w"] = u;
  CHECK(CheckTxnPermission(a, "w", txn).ok());
  a.enabled = false;
  CHECK(CheckKeyPermission(a, "", W, "x", "").ok());
}

TEST_CASE("auth: a request checked against an older revision is checked again at apply",
          "[server][auth]") {
  TempDir dir;
  TestStore s(dir.path());
  for (const auto& r : {UserAdd("root"), Grant("root", "root"), UserAdd("w"), RoleAdd("jobs"),
                        GrantPerm("jobs", authpb::Permission::READWRITE, "/q/", "/q0"),
                        Grant("w", "jobs"), Enable()}) {
    REQUIRE(s.Apply(r).status.ok());
  }
  v1::InternalRequest put;
  *put.mutable_put() = PutReq("/q/1", "v");
  put.set_auth_user("w");
  put.set_auth_revision(s->Auth()->revision);
  REQUIRE(s.Apply(put).status.ok());

  // The permission is revoked after the put was checked: apply refuses it.
  const std::uint64_t checked = s->Auth()->revision;
  v1::InternalRequest revoke;
  revoke.mutable_auth_role_revoke_permission()->set_role("jobs");
  revoke.mutable_auth_role_revoke_permission()->set_key("/q/");
  revoke.mutable_auth_role_revoke_permission()->set_range_end("/q0");
  REQUIRE(s.Apply(revoke).status.ok());
  put.set_auth_revision(checked);
  const Revision before = s->CurrentRevision();
  CHECK(Is(s.Apply(put).status, etcd_errors::kPermissionDenied));
  CHECK(s->CurrentRevision() == before);

  // Authenticate checked before a change is refused (etcd's old revision), after it recorded.
  v1::InternalRequest auth;
  auth.mutable_authenticate()->set_name("w");
  auth.mutable_authenticate()->set_token("t1");
  auth.mutable_authenticate()->set_ttl_ms(1000);
  auth.mutable_authenticate()->set_checked_revision(checked);
  CHECK(Is(s.Apply(auth).status, etcd_errors::kAuthOldRevision));
  auth.mutable_authenticate()->set_checked_revision(s->Auth()->revision);
  ApplyResult ok = s.Apply(auth);
  REQUIRE(ok.status.ok());
  // etcd's simple-token form: the entry's token, a dot, the entry's log index.
  CHECK(ok.response.auth().token() == "t1." + std::to_string(s->AppliedIndex().value()));
  CHECK(ok.response.auth().user() == "w");
  CHECK(ok.response.auth().expires_cluster_ms() > 0);

  // Disabling ends every session.
  v1::InternalRequest off;
  off.mutable_auth_disable();
  ApplyResult disabled = s.Apply(off);
  REQUIRE(disabled.status.ok());
  CHECK(disabled.response.auth().drop_all_tokens());
  CHECK(Is(s.Apply(auth).status, etcd_errors::kAuthNotEnabled));
}

TEST_CASE("auth: a client's lease revoke needs write on the keys attached at apply",
          "[server][auth]") {
  TempDir dir;
  TestStore s(dir.path());
  for (const auto& r : {UserAdd("root"), Grant("root", "root"), UserAdd("w"), RoleAdd("jobs"),
                        GrantPerm("jobs", authpb::Permission::READWRITE, "/q1/", "/q10"),
                        Grant("w", "jobs"), Enable()}) {
    REQUIRE(s.Apply(r).status.ok());
  }
  REQUIRE(s.GrantLease(7, 60'000).status.ok());
  REQUIRE(s.Put("/q1/a", "v", 7).status.ok());
  v1::InternalRequest revoke;
  revoke.mutable_lease_revoke()->set_id(7);
  revoke.set_auth_user("w");
  // Checked by its proposer at the current auth revision, when only /q1/a was attached.
  revoke.set_auth_revision(s->Auth()->revision);

  // A key outside the user's range attached since: refused at apply, nothing deleted.
  REQUIRE(s.Put("/q2/b", "v", 7).status.ok());
  const Revision before = s->CurrentRevision();
  CHECK(Is(s.Apply(revoke).status, etcd_errors::kPermissionDenied));
  CHECK(s->CurrentRevision() == before);
  CHECK(s.Get("/q1/a").kvs_size() == 1);

  // Detached again (the key is put without the lease): the revoke goes through.
  REQUIRE(s.Put("/q2/b", "v", 0).status.ok());
  REQUIRE(s.Apply(revoke).status.ok());
  CHECK(s.Get("/q1/a").kvs_size() == 0);
  CHECK(s.Get("/q2/b").kvs_size() == 1);

  // The server's own revoke (expiry) carries no stamp and is not checked.
  REQUIRE(s.GrantLease(8, 60'000).status.ok());
  REQUIRE(s.Put("/q2/c", "v", 8).status.ok());
  CHECK(s.RevokeLease(8).status.ok());
  CHECK(s.Get("/q2/c").kvs_size() == 0);
}

TEST_CASE("auth: the state survives a reopen and travels in a snapshot image", "[server][auth]") {
  TempDir dir;
  TestStore s(dir.Sub("a"));
  for (const auto& r :
       {UserAdd("root"), Grant("root", "root"), UserAdd("cert", true), RoleAdd("jobs"),
        GrantPerm("jobs", authpb::Permission::READ, "k", ""), Enable()}) {
    REQUIRE(s.Apply(r).status.ok());
  }
  const v1::StoredAuth expected = ToStoredAuth(*s->Auth());
  CHECK(expected.users(0).name() == "cert");
  CHECK(expected.users(0).password().empty());
  s.Reopen();
  CHECK(ToStoredAuth(*s->Auth()).SerializeAsString() == expected.SerializeAsString());
  REQUIRE(s->CreateCheckpoint(dir.Sub("image")).ok());
  TestStore follower(dir.Sub("b"));
  CHECK_FALSE(follower->Auth()->enabled);
  REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
  CHECK(ToStoredAuth(*follower->Auth()).SerializeAsString() == expected.SerializeAsString());
}

}  // namespace
}  // namespace epoch::server
