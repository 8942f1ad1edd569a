// epochctl's auth, user and role commands print what etcdctl 3.4 prints, in every output format:
// both run against the same cluster, command by command, and their stdout is compared byte for
// byte (auth changes leave the header's revision alone, so nothing is masked). A change runs once
// with each tool, with a reset (etcdctl) before each run so that both start from the same state.
// When both refuse (a format etcdctl has no printer for), their error lines are compared.
#include <fmt/format.h>

#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

std::string Endpoint(const TestCluster& cluster) { return cluster.node(0).client_address(); }

// `reset` commands run (with etcdctl, their outcome ignored) before each tool's run.
struct Case {
  std::vector<std::string> args;
  std::string stdin_data;
  std::vector<std::vector<std::string>> reset;
};

void Same(const TestCluster& cluster, const std::vector<std::string>& args,
          const std::string& stdin_data = {},
          const std::vector<std::vector<std::string>>& resets = {}) {
  const Case c{args, stdin_data, resets};
  const auto prepare = [&] {
    for (const auto& reset : c.reset) (void)cluster.Etcdctl(reset, {}, Endpoint(cluster));
  };
  prepare();
  std::vector<std::string> ctl = {EPOCHCTL_PATH, "--endpoints=" + Endpoint(cluster)};
  ctl.insert(ctl.end(), c.args.begin(), c.args.end());
  const CommandResult epoch = test::RunCommand(ctl, c.stdin_data, seconds(20));
  prepare();
  const CommandResult etcd = cluster.Etcdctl(c.args, c.stdin_data, Endpoint(cluster));
  INFO(fmt::format("{}", fmt::join(c.args, " "))
       << "\nepochctl: " << epoch.Describe() << "\netcdctl: " << etcd.Describe());
  REQUIRE((epoch.exit_code == 0) == (etcd.exit_code == 0));
  CHECK(epoch.out == etcd.out);
  if (epoch.exit_code != 0) {
    const auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
    CHECK(first_line(epoch.err) == first_line(etcd.err));
  }
}

std::vector<std::string> With(std::vector<std::string> args, const std::string& format) {
  args.insert(args.end(), {"-w", format});
  return args;
}

void SetUp(const TestCluster& cluster) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"user", "add", "root:rootpw"},
           {"user", "add", "alice:pw"},
           {"role", "add", "r1"},
           {"role", "add", "r3"},
           {"role", "grant-permission", "r1", "--prefix=true", "readwrite", "/a/"},
           {"role", "grant-permission", "r1", "read", "/k"},
           {"role", "grant-permission", "r1", "write", "/x", "/z"},
           {"role", "grant-permission", "r1", "--from-key", "read", "/f"},
           {"user", "grant-role", "alice", "r1"},
           {"put", "/a/1", "one"}}) {
    EtcdctlOk(cluster, args);
  }
}

}  // namespace

TEST_CASE("epochctl and etcdctl print the same for auth, user and role commands",
          "[integration][epochctl][parity][auth]") {
  auto cluster = StartCluster(1);
  const TestCluster& c = *cluster;
  SetUp(c);

  SECTION("reads and changes in every output format") {
    for (const std::string format : {"simple", "json", "fields", "protobuf", "table"}) {
      INFO("format " << format);
      for (const std::vector<std::string>& read :
           std::vector<std::vector<std::string>>{{"role", "get", "r1"},
                                                 {"role", "list"},
                                                 {"user", "get", "alice"},
                                                 {"user", "get", "alice", "--detail"},
                                                 {"user", "list"}}) {
        Same(c, With(read, format));
      }
      const std::vector<Case> changes = {
          {{"role", "add", "r2"}, {}, {{"role", "delete", "r2"}}},
          {{"role", "delete", "r4"}, {}, {{"role", "add", "r4"}}},
          {{"user", "add", "bob:pw"}, {}, {{"user", "delete", "bob"}}},
          {{"user", "add", "carol", "--no-password"}, {}, {{"user", "delete", "carol"}}},
          {{"user", "add", "dave", "--interactive=false"}, "dpw\n", {{"user", "delete", "dave"}}},
          {{"user", "add", "erin", "--new-user-password=epw"}, {}, {{"user", "delete", "erin"}}},
          {{"user", "delete", "bob"}, {}, {{"user", "add", "bob:pw"}}},
          {{"user", "passwd", "alice", "--interactive=false"}, "pw\n", {}},
          {{"user", "grant-role", "alice", "r3"}, {}, {{"user", "revoke-role", "alice", "r3"}}},
          {{"user", "revoke-role", "alice", "r3"}, {}, {{"user", "grant-role", "alice", "r3"}}},
          {{"role", "grant-permission", "r3", "--prefix=true", "read", "/p/"},
           {},
           {{"role", "revoke-permission", "r3", "--prefix=true", "/p/"}}},
          {{"role", "grant-permission", "r3", "--from-key", "write", "/g"}, {}, {}},
          {{"role", "grant-permission", "r3", "readwrite", "/m", "/n"}, {}, {}},
          {{"role", "revoke-permission", "r3", "/k1"},
           {},
           {{"role", "grant-permission", "r3", "read", "/k1"}}},
          {{"role", "revoke-permission", "r3", "--prefix=true", "/p/"},
           {},
           {{"role", "grant-permission", "r3", "--prefix=true", "read", "/p/"}}},
          {{"role", "revoke-permission", "r3", "--from-key", "/g"},
           {},
           {{"role", "grant-permission", "r3", "--from-key", "write", "/g"}}},
          {{"role", "revoke-permission", "r3", "/m", "/n"},
           {},
           {{"role", "grant-permission", "r3", "readwrite", "/m", "/n"}}},
      };
      for (const Case& change : changes) {
        Same(c, With(change.args, format), change.stdin_data, change.reset);
      }
    }
  }

  SECTION("auth enable, a user's view, root's administration, auth disable") {
    const std::vector<std::string> disable = {"--user=root:rootpw", "auth", "disable"};
    Same(c, {"auth", "enable"}, {}, {disable});
    Same(c, {"--user=alice:pw", "get", "/a/1"});
    Same(c, {"--user=alice", "--password=pw", "get", "/a/", "--prefix", "-w", "json"});
    Same(c, {"--user=root:rootpw", "user", "get", "alice", "--detail"});
    Same(c, {"--user=root:rootpw", "role", "list", "-w", "fields"});
    Same(c, {"--user=root:rootpw", "auth", "disable"}, {}, {{"auth", "enable"}});

    // The password asked on the terminal (here: stdin), prompt on stdout as etcdctl's.
    EtcdctlOk(c, {"auth", "enable"});
    const CommandResult asked = test::RunCommand(
        {EPOCHCTL_PATH, "--endpoints=" + Endpoint(c), "--user=alice", "get", "/a/1"}, "pw\n",
        seconds(20));
    INFO(asked.Describe());
    CHECK(asked.exit_code == 0);
    CHECK(asked.out == "Password: \n/a/1\none\n");
    const CommandResult status = test::RunCommand(
        {EPOCHCTL_PATH, "--endpoints=" + Endpoint(c), "--user=root:rootpw", "auth", "status"}, {},
        seconds(20));
    INFO(status.Describe());
    CHECK(status.out.find("Authentication Status: true\nAuthRevision: ") == 0);
    const CommandResult fields =
        test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + Endpoint(c), "--user=root:rootpw", "-w",
                          "fields", "auth", "status"},
                         {}, seconds(20));
    INFO(fields.Describe());
    CHECK(fields.out.find("\"Enabled\" : true\n\"AuthRevision\" : ") != std::string::npos);
    EtcdctlOk(c, disable);
  }
}

}  // namespace epoch::integration
