// auth enable|disable|status, user add|get|list|delete|passwd|grant-role|revoke-role and role
// add|get|list|delete|grant-permission|revoke-permission: etcdctl 3.4's syntax, checks and
// output. As etcdctl, a change is made before its output is printed, so `-w table` (which etcdctl
// has no printer for here) reports an error after the change.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <iostream>
#include <memory>

#include "commands.h"
#include "credentials.h"
#include "epoch/client/auth.h"
#include "epoch/etcd_errors.h"
#include "machine_output.h"

namespace epoch::ctl {
namespace {

namespace pb = etcdserverpb;
using Args = std::shared_ptr<std::vector<std::string>>;
using Printer = std::function<void(std::ostream&)>;

// etcdctl's display: json, fields and protobuf print the response; simple prints `simple`;
// table is refused.
template <typename Response>
Status Display(Ctl& ctl, const Response& r, const Printer& simple) {
  Result<bool> printed = PrintMachine(ctl, r);
  if (!printed.ok()) return printed.status();
  if (*printed) return Status::Ok();
  if (ctl.format() == OutputFormat::kTable) return FormatUnsupported(ctl, "table");
  simple(ctl.out());
  return Status::Ok();
}

// Runs `call` on the command's client and displays its response.
template <typename Call, typename Simple>
Status Change(Ctl& ctl, Call call, Simple simple) {
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  auto response = call(**client);
  if (!response.ok()) return response.status();
  return Display(ctl, *response, [&](std::ostream& out) { simple(out, *response); });
}

Status BadArgs(std::string_view message) { return Status::InvalidArgument(std::string(message)); }

// --- auth ---

Status RunAuthEnable(Ctl& ctl, const std::vector<std::string>& args) {
  if (!args.empty()) return BadArgs("auth enable command does not accept any arguments");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  // As etcdctl: a missing root role is created and granted to root, then enabling is retried.
  while (true) {
    Result<pb::AuthEnableResponse> enabled = client::AuthEnable(**client, ctl.Call());
    if (enabled.ok()) break;
    if (!enabled.status().Is(ErrorId::kRootRoleNotExist)) return enabled.status();
    Result<pb::AuthRoleAddResponse> role = client::RoleAdd(**client, "root", ctl.Call());
    if (!role.ok()) return role.status();
    Result<pb::AuthUserGrantRoleResponse> grant =
        client::UserGrantRole(**client, "root", "root", ctl.Call());
    if (!grant.ok()) return grant.status();
  }
  ctl.out() << "Authentication Enabled\n";
  return Status::Ok();
}

Status RunAuthDisable(Ctl& ctl, const std::vector<std::string>& args) {
  if (!args.empty()) return BadArgs("auth disable command does not accept any arguments");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<pb::AuthDisableResponse> disabled = client::AuthDisable(**client, ctl.Call());
  if (!disabled.ok()) return disabled.status();
  ctl.out() << "Authentication Disabled\n";
  return Status::Ok();
}

// etcdctl 3.5's `auth status` (3.4 has none).
Status RunAuthStatus(Ctl& ctl, const std::vector<std::string>& args) {
  if (!args.empty()) return BadArgs("auth status command does not accept any arguments");
  return Change(
      ctl, [&](client::Client& c) { return client::AuthStatus(c, ctl.Call()); },
      [](std::ostream& out, const pb::AuthStatusResponse& r) {
        out << "Authentication Status: " << (r.enabled() ? "true" : "false") << "\n"
            << "AuthRevision: " << r.authrevision() << "\n";
      });
}

// --- user ---

struct UserAddFlags {
  bool no_password = false;
  bool interactive = true;
  std::string new_user_password;
};

// etcdctl's fmt.Scanf("%s"): the first whitespace-separated word of stdin.
std::string ScanWord() {
  std::string word;
  std::cin >> word;
  return word;
}

Status RunUserAdd(Ctl& ctl, const std::vector<std::string>& args, const UserAddFlags& f) {
  if (args.size() != 1) return BadArgs("user add command requires user name as its argument");
  pb::AuthUserAddRequest request;
  if (f.no_password) {
    request.set_name(args[0]);
    request.mutable_options()->set_no_password(true);
  } else if (!f.new_user_password.empty()) {
    request.set_name(args[0]);
    request.set_password(f.new_user_password);
  } else if (const std::size_t colon = args[0].find(':'); colon != std::string::npos) {
    request.set_name(args[0].substr(0, colon));
    request.set_password(args[0].substr(colon + 1));
    if (request.name().empty()) return BadArgs("empty user name is not allowed");
  } else {
    request.set_name(args[0]);
    if (!f.interactive) {
      request.set_password(ScanWord());
    } else {
      Result<std::string> password = AskNewPassword(args[0], ctl.out(), std::cin);
      if (!password.ok()) return password.status();
      request.set_password(*password);
    }
  }
  return Change(
      ctl, [&](client::Client& c) { return client::UserAdd(c, request, ctl.Call()); },
      [&](std::ostream& out, const auto&) { out << "User " << request.name() << " created\n"; });
}

// etcdctl's simple RoleGet: read then write permissions, ranges as [key, end) with the prefix
// they stand for, "\0" as an open end.
void PrintRole(std::ostream& out, const std::string& role, const pb::AuthRoleGetResponse& r) {
  out << "Role " << role << "\n";
  const auto print = [&](bool (*wanted)(authpb::Permission::Type)) {
    for (const authpb::Permission& perm : r.perm()) {
      if (!wanted(perm.permtype())) continue;
      if (perm.range_end().empty()) {
        out << "\t" << perm.key() << "\n";
        continue;
      }
      if (perm.range_end() != std::string(1, '\0')) {
        out << "\t[" << perm.key() << ", " << perm.range_end() << ")";
      } else {
        out << "\t[" << perm.key() << ", <open ended>";
      }
      if (client::PrefixRangeEnd(perm.key()) == perm.range_end()) {
        out << " (prefix " << perm.key() << ")";
      }
      out << "\n";
    }
  };
  out << "KV Read:\n";
  print([](authpb::Permission::Type t) { return t != authpb::Permission::WRITE; });
  out << "KV Write:\n";
  print([](authpb::Permission::Type t) { return t != authpb::Permission::READ; });
}

Status RunUserGet(Ctl& ctl, const std::vector<std::string>& args, bool detail) {
  if (args.size() != 1) return BadArgs("user get command requires user name as its argument");
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  const std::string& name = args[0];
  Result<pb::AuthUserGetResponse> user = client::UserGet(**client, name, ctl.Call());
  if (!user.ok()) return user.status();
  if (!detail) {
    return Display(ctl, *user, [&](std::ostream& out) {
      out << "User: " << name << "\nRoles:";
      for (const std::string& role : user->roles()) out << " " << role;
      out << "\n";
    });
  }
  // etcdctl: the name, then each role as `role get` displays it.
  ctl.out() << "User: " << name << "\n";
  for (const std::string& role : user->roles()) {
    ctl.out() << "\n";
    Result<pb::AuthRoleGetResponse> perms = client::RoleGet(**client, role, ctl.Call());
    if (!perms.ok()) return perms.status();
    EPOCH_RETURN_IF_ERROR(
        Display(ctl, *perms, [&](std::ostream& out) { PrintRole(out, role, *perms); }));
  }
  return Status::Ok();
}

void PrintNames(std::ostream& out, const google::protobuf::RepeatedPtrField<std::string>& names) {
  for (const std::string& name : names) out << name << "\n";
}

Status RunUserList(Ctl& ctl, const std::vector<std::string>& args) {
  if (!args.empty()) return BadArgs("user list command requires no arguments");
  return Change(
      ctl, [&](client::Client& c) { return client::UserList(c, ctl.Call()); },
      [](std::ostream& out, const pb::AuthUserListResponse& r) { PrintNames(out, r.users()); });
}

Status RunUserDelete(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 1) return BadArgs("user delete command requires user name as its argument");
  return Change(
      ctl, [&](client::Client& c) { return client::UserDelete(c, args[0], ctl.Call()); },
      [&](std::ostream& out, const auto&) { out << "User " << args[0] << " deleted\n"; });
}

Status RunUserPasswd(Ctl& ctl, const std::vector<std::string>& args, bool interactive) {
  if (args.size() != 1) return BadArgs("user passwd command requires user name as its argument");
  std::string password;
  if (!interactive) {
    password = ScanWord();
  } else {
    Result<std::string> asked = AskNewPassword(args[0], ctl.out(), std::cin);
    if (!asked.ok()) return asked.status();
    password = *asked;
  }
  return Change(
      ctl,
      [&](client::Client& c) {
        return client::UserChangePassword(c, args[0], password, ctl.Call());
      },
      [](std::ostream& out, const auto&) { out << "Password updated\n"; });
}

Status RunUserGrantRole(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 2) {
    return BadArgs("user grant command requires user name and role name as its argument");
  }
  return Change(
      ctl,
      [&](client::Client& c) { return client::UserGrantRole(c, args[0], args[1], ctl.Call()); },
      [&](std::ostream& out, const auto&) {
        out << "Role " << args[1] << " is granted to user " << args[0] << "\n";
      });
}

Status RunUserRevokeRole(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 2) {
    return BadArgs("user revoke-role requires user name and role name as its argument");
  }
  return Change(
      ctl,
      [&](client::Client& c) { return client::UserRevokeRole(c, args[0], args[1], ctl.Call()); },
      [&](std::ostream& out, const auto&) {
        out << "Role " << args[1] << " is revoked from user " << args[0] << "\n";
      });
}

// --- role ---

struct PermFlags {
  bool prefix = false;
  bool from_key = false;
};

// etcdctl's permRange: [key, end) from the key argument(s) and --prefix / --from-key. An empty
// key stands for every key ("\0", open ended with either flag).
Result<std::pair<std::string, std::string>> PermRange(const std::vector<std::string>& keys,
                                                      const PermFlags& f) {
  const std::string open_end(1, '\0');
  std::string key = keys[0];
  if (key.empty()) {
    if (f.prefix && f.from_key)
      return BadArgs("--from-key and --prefix flags are mutually exclusive");
    return std::pair{open_end, (f.prefix || f.from_key) ? open_end : std::string()};
  }
  if (keys.size() == 1) {
    if (f.prefix && f.from_key)
      return BadArgs("--from-key and --prefix flags are mutually exclusive");
    if (f.prefix) return std::pair{key, client::PrefixRangeEnd(key)};
    if (f.from_key) return std::pair{key, open_end};
    return std::pair{key, std::string()};
  }
  if (f.prefix) return BadArgs("unexpected endkey argument with --prefix flag");
  if (f.from_key) return BadArgs("unexpected endkey argument with --from-key flag");
  return std::pair{key, keys[1]};
}

Result<authpb::Permission::Type> ParsePermType(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  authpb::Permission::Type type{};
  if (!authpb::Permission::Type_Parse(text, &type)) {
    return BadArgs(fmt::format("invalid permission type: {}", text));
  }
  return type;
}

Status RunRoleAdd(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 1) return BadArgs("role add command requires role name as its argument");
  return Change(
      ctl, [&](client::Client& c) { return client::RoleAdd(c, args[0], ctl.Call()); },
      [&](std::ostream& out, const auto&) { out << "Role " << args[0] << " created\n"; });
}

Status RunRoleGet(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 1) return BadArgs("role get command requires role name as its argument");
  return Change(
      ctl, [&](client::Client& c) { return client::RoleGet(c, args[0], ctl.Call()); },
      [&](std::ostream& out, const pb::AuthRoleGetResponse& r) { PrintRole(out, args[0], r); });
}

Status RunRoleList(Ctl& ctl, const std::vector<std::string>& args) {
  if (!args.empty()) return BadArgs("role list command requires no arguments");
  return Change(
      ctl, [&](client::Client& c) { return client::RoleList(c, ctl.Call()); },
      [](std::ostream& out, const pb::AuthRoleListResponse& r) { PrintNames(out, r.roles()); });
}

Status RunRoleDelete(Ctl& ctl, const std::vector<std::string>& args) {
  if (args.size() != 1) return BadArgs("role delete command requires role name as its argument");
  return Change(
      ctl, [&](client::Client& c) { return client::RoleDelete(c, args[0], ctl.Call()); },
      [&](std::ostream& out, const auto&) { out << "Role " << args[0] << " deleted\n"; });
}

Status RunRoleGrant(Ctl& ctl, const std::vector<std::string>& args, const PermFlags& f) {
  if (args.size() < 3) {
    return BadArgs(
        "role grant command requires role name, permission type, and key [endkey] as its "
        "argument");
  }
  Result<authpb::Permission::Type> type = ParsePermType(args[1]);
  if (!type.ok()) return type.status();
  Result<std::pair<std::string, std::string>> range = PermRange({args.begin() + 2, args.end()}, f);
  if (!range.ok()) return range.status();
  authpb::Permission perm;
  perm.set_permtype(*type);
  perm.set_key(range->first);
  perm.set_range_end(range->second);
  return Change(
      ctl,
      [&](client::Client& c) { return client::RoleGrantPermission(c, args[0], perm, ctl.Call()); },
      [&](std::ostream& out, const auto&) { out << "Role " << args[0] << " updated\n"; });
}

Status RunRoleRevoke(Ctl& ctl, const std::vector<std::string>& args, const PermFlags& f) {
  if (args.size() < 2) {
    return BadArgs(
        "role revoke-permission command requires role name and key [endkey] as its argument");
  }
  Result<std::pair<std::string, std::string>> range = PermRange({args.begin() + 1, args.end()}, f);
  if (!range.ok()) return range.status();
  const auto& [key, end] = *range;
  return Change(
      ctl,
      [&](client::Client& c) {
        return client::RoleRevokePermission(c, args[0], key, end, ctl.Call());
      },
      [&](std::ostream& out, const auto&) {
        // etcdctl prints the key argument as given, the end as computed.
        if (end.empty()) {
          out << "Permission of key " << args[1] << " is revoked from role " << args[0] << "\n";
        } else if (end != std::string(1, '\0')) {
          out << "Permission of range [" << args[1] << ", " << end << ") is revoked from role "
              << args[0] << "\n";
        } else {
          out << "Permission of range [" << args[1] << ", <open ended> is revoked from role "
              << args[0] << "\n";
        }
      });
}

// A subcommand taking its positional arguments as a list (etcdctl checks their count itself).
CLI::App* Sub(CLI::App* parent, Ctl& ctl, const std::string& name, const std::string& help,
              std::function<Status(const std::vector<std::string>&)> run) {
  auto args = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = parent->add_subcommand(name, help);
  cmd->add_option("args", *args, "Arguments");
  cmd->callback(Runner(ctl, [args, run = std::move(run)] { return run(*args); }));
  return cmd;
}

void RegisterAuth(CLI::App& app, Ctl& ctl) {
  CLI::App* auth = app.add_subcommand("auth", "Enable or disable authentication");
  auth->require_subcommand(1);
  Sub(auth, ctl, "enable", "Enables authentication",
      [&ctl](const auto& args) { return RunAuthEnable(ctl, args); });
  Sub(auth, ctl, "disable", "Disables authentication",
      [&ctl](const auto& args) { return RunAuthDisable(ctl, args); });
  Sub(auth, ctl, "status", "Returns authentication status",
      [&ctl](const auto& args) { return RunAuthStatus(ctl, args); });
}

void RegisterUser(CLI::App& app, Ctl& ctl) {
  CLI::App* user = app.add_subcommand("user", "User related commands");
  user->require_subcommand(1);
  auto add = std::make_shared<UserAddFlags>();
  CLI::App* add_cmd = Sub(user, ctl, "add", "Adds a new user",
                          [&ctl, add](const auto& args) { return RunUserAdd(ctl, args, *add); });
  add_cmd->add_flag("--no-password", add->no_password,
                    "Create a user without password (CN based auth only)");
  add_cmd->add_flag("--interactive{true}", add->interactive,
                    "Read password from stdin instead of interactive terminal");
  add_cmd->add_option("--new-user-password", add->new_user_password,
                      "Supply password from the command line flag");
  auto detail = std::make_shared<bool>(false);
  CLI::App* get = Sub(user, ctl, "get", "Gets detailed information of a user",
                      [&ctl, detail](const auto& args) { return RunUserGet(ctl, args, *detail); });
  get->add_flag("--detail", *detail, "Show permissions of roles granted to the user");
  Sub(user, ctl, "list", "Lists all users",
      [&ctl](const auto& args) { return RunUserList(ctl, args); });
  Sub(user, ctl, "delete", "Deletes a user",
      [&ctl](const auto& args) { return RunUserDelete(ctl, args); });
  auto interactive = std::make_shared<bool>(true);
  CLI::App* passwd =
      Sub(user, ctl, "passwd", "Changes password of user",
          [&ctl, interactive](const auto& args) { return RunUserPasswd(ctl, args, *interactive); });
  passwd->add_flag("--interactive{true}", *interactive,
                   "If true, read password from stdin instead of interactive terminal");
  Sub(user, ctl, "grant-role", "Grants a role to a user",
      [&ctl](const auto& args) { return RunUserGrantRole(ctl, args); });
  Sub(user, ctl, "revoke-role", "Revokes a role from a user",
      [&ctl](const auto& args) { return RunUserRevokeRole(ctl, args); });
}

void RegisterRole(CLI::App& app, Ctl& ctl) {
  CLI::App* role = app.add_subcommand("role", "Role related commands");
  role->require_subcommand(1);
  Sub(role, ctl, "add", "Adds a new role",
      [&ctl](const auto& args) { return RunRoleAdd(ctl, args); });
  Sub(role, ctl, "get", "Gets detailed information of a role",
      [&ctl](const auto& args) { return RunRoleGet(ctl, args); });
  Sub(role, ctl, "list", "Lists all roles",
      [&ctl](const auto& args) { return RunRoleList(ctl, args); });
  Sub(role, ctl, "delete", "Deletes a role",
      [&ctl](const auto& args) { return RunRoleDelete(ctl, args); });
  for (const bool grant : {true, false}) {
    auto flags = std::make_shared<PermFlags>();
    CLI::App* cmd =
        grant ? Sub(role, ctl, "grant-permission", "Grants a key to a role",
                    [&ctl, flags](const auto& args) { return RunRoleGrant(ctl, args, *flags); })
              : Sub(role, ctl, "revoke-permission", "Revokes a key from a role",
                    [&ctl, flags](const auto& args) { return RunRoleRevoke(ctl, args, *flags); });
    cmd->add_flag("--prefix", flags->prefix, "Grant a prefix permission");
    cmd->add_flag("--from-key", flags->from_key,
                  "Grant a permission of keys that are greater than or equal to the given key "
                  "using byte compare");
  }
}

}  // namespace

void RegisterAuthCommands(CLI::App& app, Ctl& ctl) {
  RegisterAuth(app, ctl);
  RegisterUser(app, ctl);
  RegisterRole(app, ctl);
}

}  // namespace epoch::ctl
