// epochctl prints what etcdctl 3.4 prints: both run against the same cluster, command by
// command, and their stdout is compared byte for byte. Reads run on an unchanged state; writes
// run once with each tool, so the values that must differ between two writes (revisions, lease
// ids, timings, indexes that ticks advance) are masked before comparing.
#include <fmt/format.h>

#include <regex>

#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

struct Outputs {
  std::string epoch;
  std::string etcd;
};

// One endpoint for both tools: the header names the member that answered.
std::string Endpoint(const TestCluster& cluster) { return cluster.node(0).client_address(); }

// `args` run by epochctl, then by etcdctl; `reset` (etcdctl arguments) runs before each so that
// both writes start from the same state.
Outputs Both(const TestCluster& cluster, const std::vector<std::string>& args,
             std::string_view stdin_data = {}, const std::vector<std::string>& reset = {}) {
  const auto prepare = [&] {
    if (!reset.empty()) REQUIRE(cluster.Etcdctl(reset, {}, Endpoint(cluster)).exit_code == 0);
  };
  prepare();
  std::vector<std::string> ctl = {EPOCHCTL_PATH, "--endpoints=" + Endpoint(cluster)};
  ctl.insert(ctl.end(), args.begin(), args.end());
  const CommandResult epoch = test::RunCommand(ctl, stdin_data, seconds(20));
  prepare();
  const CommandResult etcd = cluster.Etcdctl(args, stdin_data, Endpoint(cluster));
  const std::string what = fmt::format("{}", fmt::join(args, " "));
  INFO(what << "\nepochctl: " << epoch.Describe() << "\netcdctl: " << etcd.Describe());
  REQUIRE((epoch.exit_code == 0) == (etcd.exit_code == 0));
  if (epoch.exit_code == 0) return {epoch.out, etcd.out};
  // Both refuse (a format the command has no printer for): the same error line, less the Go
  // value etcdctl appends to "marshal unsupported for type T (...)".
  const auto first_line = [](const std::string& text) { return text.substr(0, text.find('\n')); };
  const std::string etcd_line = first_line(etcd.err);
  return {first_line(epoch.err), etcd_line.substr(0, etcd_line.find(" (&"))};
}

// Values two successive writes or probes legitimately differ in.
std::string Mask(std::string text) {
  static const std::regex kNumbers(
      R"re("(revision|mod_revision|create_revision|version|ID|id|raftIndex|raftAppliedIndex|ttl|TTL)":\d+)re");
  static const std::regex kFields(
      R"re("(Revision|ModRevision|CreateRevision|Version|PrevVersion|PrevModRevision|PrevCreateRevision|ID|RaftIndex|RaftAppliedIndex|TTL)" : \d+)re");
  static const std::regex kTook(R"re("took":"[^"]*"|"Took" : \S+)re");
  static const std::regex kLease(R"re(lease [0-9a-f]{16})re");
  text = std::regex_replace(text, kNumbers, "\"$1\":N");
  text = std::regex_replace(text, kFields, "\"$1\" : N");
  text = std::regex_replace(text, kTook, "T");
  return std::regex_replace(text, kLease, "lease L");
}

void Same(const TestCluster& cluster, const std::vector<std::string>& args,
          std::string_view stdin_data = {}) {
  const Outputs out = Both(cluster, args, stdin_data);
  INFO(fmt::format("{}", fmt::join(args, " ")));
  CHECK(out.epoch == out.etcd);
}

void SameMasked(const TestCluster& cluster, const std::vector<std::string>& args,
                std::string_view stdin_data = {}, const std::vector<std::string>& reset = {}) {
  const Outputs out = Both(cluster, args, stdin_data, reset);
  INFO(fmt::format("{}\nepochctl: {}etcdctl:  {}", fmt::join(args, " "), out.epoch, out.etcd));
  CHECK(Mask(out.epoch) == Mask(out.etcd));
}

std::string LeaseOf(const TestCluster& cluster) {
  const CommandResult r = cluster.Etcdctl({"lease", "grant", "600"});
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.out.rfind("lease ", 0) == 0);  // "lease 694d7a1b2c3d4e5f granted with TTL(600s)"
  return r.out.substr(6, 16);
}

}  // namespace

TEST_CASE("epochctl and etcdctl print the same for the same cluster state",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  const std::string lease = LeaseOf(c);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"p/a", "1"}, {"p/b", "two words"}, {"p/<&>", "html \"quoted\"\n"}, {"q", ""}}) {
    REQUIRE(c.Etcdctl({"put", k, v}).exit_code == 0);
  }
  REQUIRE(c.Etcdctl({"put", "p/leased", "x", "--lease=" + lease}).exit_code == 0);

  SECTION("reads") {
    for (const std::string format : {"simple", "json", "fields", "protobuf"}) {
      Same(c, {"get", "p/a", "-w", format});
      Same(c, {"get", "p/", "--prefix", "-w", format});
      if (format == "simple") Same(c, {"get", "p/", "--prefix", "--print-value-only"});
      Same(c, {"get", "p/", "--prefix", "--keys-only", "-w", format});
      Same(c, {"get", "p/", "--prefix", "--limit=2", "--order=DESCEND", "-w", format});
      Same(c, {"get", "q", "-w", format});
      Same(c, {"get", "absent", "-w", format});
      Same(c, {"get", "p/a", "--rev=3", "-w", format});
      Same(c, {"lease", "list", "-w", format});
      Same(c, {"member", "list", "-w", format});
      Same(c, {"alarm", "list", "-w", format});
    }
    Same(c, {"member", "list", "-w", "table"});
    Same(c, {"endpoint", "hashkv"});
    Same(c, {"endpoint", "hashkv", "--rev=4", "-w", "table"});
    const CommandResult version =
        test::RunCommand({EPOCHCTL_PATH, "version"}, {}, std::chrono::seconds(10));
    CHECK(version.out.find("epochctl version: ") == 0);
    CHECK(version.out.find("\nAPI version: 3.4\n") != std::string::npos);
    CHECK(c.Etcdctl({"version"}).out.find("\nAPI version: 3.4\n") != std::string::npos);
    for (const std::string format : {"json", "fields", "protobuf"}) {
      SameMasked(c, {"lease", "timetolive", lease, "-w", format});
      SameMasked(c, {"lease", "timetolive", lease, "--keys", "-w", format});
      SameMasked(c, {"endpoint", "status", "-w", format});
      SameMasked(c, {"endpoint", "health", "-w", format});
      Same(c, {"endpoint", "hashkv", "-w", format});
    }
  }

  SECTION("writes") {
    const std::vector<std::string> reset_w = {"put", "w", "v0"};
    const std::vector<std::string> reset_p = {"put", "p/c", "c"};
    for (const std::string format : {"simple", "json", "fields"}) {
      SameMasked(c, {"put", "w", "v", "-w", format});
      SameMasked(c, {"put", "w", "v2", "--prev-kv", "-w", format}, {}, reset_w);
      SameMasked(c, {"del", "p/c", "--prev-kv", "-w", format}, {}, reset_p);
      SameMasked(c, {"del", "d/", "--prefix", "-w", format}, {}, {"put", "d/x", "x"});
      SameMasked(c, {"del", "absent", "-w", format});
      SameMasked(c, {"lease", "grant", "60", "-w", format});
      SameMasked(c, {"lease", "keep-alive", "--once", lease, "-w", format});
      SameMasked(c, {"txn", "-w", format}, "mod(\"w\") > \"0\"\n\nput t 1\nget w\n\ndel absent\n\n",
                 reset_w);
      SameMasked(c, {"txn", "-w", format}, "value(\"w\") = \"nope\"\n\nput t 1\n\ndel p/c\n\n",
                 reset_p);
    }
    // One revision can be compacted once: each tool compacts its own, and they print alike.
    const CommandResult epoch = test::RunCommand(
        {EPOCHCTL_PATH, "--endpoints=" + c.Endpoints(), "compaction", "2", "-w", "json"}, {},
        seconds(20));
    const CommandResult etcd = c.Etcdctl({"compaction", "3", "-w", "json"});
    CHECK(epoch.out == "compacted revision 2\n");
    CHECK(etcd.out == "compacted revision 3\n");
  }

  SECTION("lease revoke") {
    for (const std::string format : {"simple", "json", "fields"}) {
      const std::string mine = LeaseOf(c);
      const std::string theirs = LeaseOf(c);
      const CommandResult epoch = test::RunCommand(
          {EPOCHCTL_PATH, "--endpoints=" + Endpoint(c), "lease", "revoke", mine, "-w", format}, {},
          seconds(20));
      const CommandResult etcd =
          c.Etcdctl({"lease", "revoke", theirs, "-w", format}, {}, Endpoint(c));
      INFO(epoch.Describe() << "\n" << etcd.Describe());
      CHECK(Mask(epoch.out) == Mask(etcd.out));
    }
  }
}

}  // namespace epoch::integration
