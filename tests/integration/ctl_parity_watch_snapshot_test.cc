// epochctl's `watch -i`, `snapshot status` and `check perf` against etcdctl 3.4's.
//
// watch -i: both tools run side by side on one endpoint of one cluster, are fed the same lines as
// the test goes, and print the same events: their stdout is compared byte for byte after each
// write, their stderr (the "Invalid command" lines) and exit status at the end of input.
// snapshot status: etcdctl cannot read Epoch's archive, so each tool reads its own server's file
// (a real etcd 3.4 next to the cluster, with the same keys) and the outputs are compared with the
// values masked: same fields, names, order and layout in every format.
// check perf: shortened to 2 s with EPOCH_CHECK_PERF_SECONDS (Epoch's); the verdict lines and the
// exit status are checked, not the numbers; the refusals are compared with etcdctl's.
// watch -- CMD: both tools run the same command (a script printing etcdctl's ETCD_WATCH_*
// variables) for the same events, on the command line and in `watch -i`; their stdout is compared
// byte for byte, and the argument refusals and failed commands by stderr and exit status.
// check datascale: shortened with EPOCH_CHECK_DATASCALE_KEYS; the output lines and the exit status
// are checked, not the memory figure; the refusals are compared with etcdctl's.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <regex>

#include "gateway_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

using std::chrono::seconds;

// A command fed through a stdin pipe, stdout and stderr in files of `dir`.
class Interactive {
 public:
  Interactive(const std::vector<std::string>& argv, const std::string& dir, const std::string& name,
              const std::vector<std::string>& env = {})
      : out_(dir + "/" + name + ".out"), err_(dir + "/" + name + ".err") {
    Result<test::ChildProcess> child =
        test::ChildProcess::SpawnWithStdinPipe(argv, out_, err_, &stdin_fd_, env);
    REQUIRE(child.ok());
    process_ = std::move(*child);
  }
  ~Interactive() { CloseStdin(); }
  Interactive(const Interactive&) = delete;
  Interactive& operator=(const Interactive&) = delete;

  void Write(std::string_view text) {
    REQUIRE(stdin_fd_ >= 0);
    REQUIRE(write(stdin_fd_, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  }
  void CloseStdin() {
    if (stdin_fd_ >= 0) close(stdin_fd_);
    stdin_fd_ = -1;
  }
  [[nodiscard]] std::string Out() const { return ReadFileIfExists(out_); }
  [[nodiscard]] std::string Err() const { return ReadFileIfExists(err_); }
  std::optional<int> WaitExit() { return process_.WaitExit(seconds(20)); }

 private:
  std::string out_;
  std::string err_;
  int stdin_fd_ = -1;
  test::ChildProcess process_;
};

// epochctl and etcdctl `watch -i` on one endpoint.
struct WatchPair {
  WatchPair(const TestCluster& c, const std::string& format, const std::string& tag)
      : epoch({EPOCHCTL_PATH, "--endpoints=" + c.node(0).client_address(), "watch", "-i", "-w",
               format},
              c.dir(), "epochctl-" + tag),
        etcd({test::kEtcdctlPath, "--endpoints=" + c.node(0).client_address(), "watch", "-i", "-w",
              format},
             c.dir(), "etcdctl-" + tag, {"ETCDCTL_API=3"}) {}

  void Write(std::string_view text) {
    epoch.Write(text);
    etcd.Write(text);
  }
  void CloseStdin() {
    epoch.CloseStdin();
    etcd.CloseStdin();
  }
  // Waits until both printed the same, more than `before` bytes; returns that output.
  std::string SameOutputPast(std::size_t before) {
    const bool same = Eventually(
        [&] {
          const std::string e = epoch.Out();
          return e.size() > before && e == etcd.Out();
        },
        seconds(10), kProcessPoll);
    INFO("epochctl:\n" << epoch.Out() << "\netcdctl:\n" << etcd.Out());
    CHECK(same);
    return epoch.Out();
  }

  Interactive epoch;
  Interactive etcd;
};

// Digits, hex words and sizes masked; table rules and padding collapsed (the widths follow the
// values).
std::string MaskValues(std::string text) {
  static const std::regex kSize(R"re(\d+(\.\d+)? [kMGT]?B)re");
  static const std::regex kNumber(R"re(\b[0-9a-f]*[0-9][0-9a-f]*\b)re");
  static const std::regex kRule("-+");
  static const std::regex kSpaces(" +");
  text = std::regex_replace(text, kSize, "SIZE");
  text = std::regex_replace(text, kNumber, "N");
  text = std::regex_replace(text, kRule, "-");
  return std::regex_replace(text, kSpaces, " ");
}

// A script that prints etcdctl's per-event variables on one line; returns its path.
std::string WriteEnvScript(const std::string& dir) {
  const std::string path = dir + "/watch-env.sh";
  std::ofstream(path) << "#!/bin/sh\n"
                         "printf 'rev=%s key=%s type=%s value=%s args=%s\\n' "
                         "\"$ETCD_WATCH_REVISION\" \"$ETCD_WATCH_KEY\" \"$ETCD_WATCH_EVENT_TYPE\" "
                         "\"$ETCD_WATCH_VALUE\" \"$*\"\n";
  REQUIRE(chmod(path.c_str(), 0755) == 0);
  return path;
}

// The next revision of the cluster: a watch from it sees every later write, however late its
// tool created it.
std::int64_t NextRevision(const TestCluster& c) {
  return std::stoll(JsonField(EtcdctlOk(c, {"get", "nothing", "-w", "json"}), "header.revision")) +
         1;
}

}  // namespace

TEST_CASE("epochctl watch -i prints what etcdctl watch -i prints",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  SECTION("events in simple and json, and the lines etcdctl goes on after") {
    const std::string old_rev =
        JsonField(EtcdctlOk(c, {"put", "wi/old", "0", "-w", "json"}), "header.revision");
    REQUIRE(!old_rev.empty());
    for (const std::string format : {"simple", "json"}) {
      INFO("-w " << format);
      WatchPair w(c, format, format);
      // Lines etcdctl answers with "Invalid command ..." and goes on after.
      w.Write("hello world\nwatch\n\nwatch wi/x wi/y --prefix\nwatch -- --prefix\n");
      // A watch from a past revision replays at once.
      w.Write("watch --rev " + old_rev + " wi/old\n");
      std::size_t seen = w.SameOutputPast(0).size();
      // The new watches start at the next revision, so a watch its tool created only after a
      // write still sees it.
      const std::int64_t next =
          std::stoll(JsonField(EtcdctlOk(c, {"get", "wi/old", "-w", "json"}), "header.revision")) +
          1;
      w.Write(
          fmt::format("watch wi/a --prev-kv --rev {0}\nwatch \"wi/p/\" --prefix --rev={0}\n"
                      "watch --rev {0} wi/r1 wi/r3\n",
                      next));
      // Each write is awaited in both outputs before the next, so the order is the same.
      for (const std::vector<std::string>& write :
           std::vector<std::vector<std::string>>{{"put", "wi/a", "1" + format},
                                                 {"put", "wi/a", "2" + format},
                                                 {"put", "wi/p/x", "px"},
                                                 {"put", "wi/r2", "in range"},
                                                 {"del", "wi/a"}}) {
        INFO(fmt::format("{}", fmt::join(write, " ")));
        REQUIRE(c.Etcdctl(write).exit_code == 0);
        seen = w.SameOutputPast(seen).size();
      }
      w.CloseStdin();
      const std::optional<int> epoch_exit = w.epoch.WaitExit();
      const std::optional<int> etcd_exit = w.etcd.WaitExit();
      CHECK(epoch_exit == etcd_exit);
      CHECK(etcd_exit == std::optional<int>(3));
      CHECK(w.epoch.Err() == w.etcd.Err());
      CHECK(w.epoch.Err().find("Invalid command hello world (only support watch)\n") !=
            std::string::npos);
      CHECK(w.epoch.Out() == w.etcd.Out());
    }
  }

  SECTION("a compacted revision cancels that watch only") {
    // Revision 2 is a put of wi/c, compacted away by the next one's revision.
    REQUIRE(c.Etcdctl({"put", "wi/c", "c"}).exit_code == 0);
    const std::string rev =
        JsonField(EtcdctlOk(c, {"put", "wi/c", "c2", "-w", "json"}), "header.revision");
    REQUIRE(c.Etcdctl({"compaction", rev}).exit_code == 0);
    WatchPair w(c, "json", "compacted");
    w.Write("watch --rev 2 wi/c\n");
    w.SameOutputPast(0);
    CHECK(Eventually([&] { return !w.etcd.Err().empty() && w.epoch.Err() == w.etcd.Err(); },
                     seconds(10), kProcessPoll));
    CHECK(w.epoch.Err() ==
          "watch was canceled (etcdserver: mvcc: required revision has been compacted)\n");
    w.Write("watch wi/c\n");
    const std::size_t seen = w.epoch.Out().size();
    REQUIRE(c.Etcdctl({"put", "wi/c", "again"}).exit_code == 0);
    w.SameOutputPast(seen);
  }

  SECTION("lines etcdctl exits on") {
    for (const std::string input :
         {"watch k --progress-notify\n", "watch k --rev x\n", "watch k --rev\n", "watch -x k\n",
          "watch k --\n", "watch --prefix\n", "watch k --help\n", "watch k\n",
          "watch k\nwatch no newline at the end"}) {
      INFO(input);
      const CommandResult epoch = test::RunCommand(
          {EPOCHCTL_PATH, "--endpoints=" + c.node(0).client_address(), "watch", "-i"}, input,
          seconds(20));
      const CommandResult etcd = c.Etcdctl({"watch", "-i"}, input, c.node(0).client_address());
      INFO("epochctl: " << epoch.Describe() << "\netcdctl: " << etcd.Describe());
      CHECK(epoch.exit_code == etcd.exit_code);
      CHECK(epoch.err == etcd.err);
      CHECK(epoch.out == etcd.out);
    }
  }
}

TEST_CASE("epochctl snapshot status prints etcdctl's hash, revision, total keys and size",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  RealEtcd etcd;
  const std::string etcd_endpoint = fmt::format("127.0.0.1:{}", etcd.client_port());
  for (int i = 0; i < 5; ++i) {
    const std::vector<std::string> put = {"put", fmt::format("s/{}", i), "v"};
    REQUIRE(c.Etcdctl(put).exit_code == 0);
    REQUIRE(test::RunEtcdctl(etcd_endpoint, put).exit_code == 0);
  }
  const std::string epoch_file = c.dir() + "/epoch.db";
  const std::string etcd_file = c.dir() + "/etcd.db";
  REQUIRE(test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + c.node(0).client_address(), "snapshot",
                            "save", epoch_file},
                           {}, seconds(30))
              .exit_code == 0);
  REQUIRE(test::RunEtcdctl(etcd_endpoint, {"snapshot", "save", etcd_file}).exit_code == 0);

  for (const std::string format : {"simple", "table", "json", "fields", "protobuf"}) {
    const CommandResult mine = test::RunCommand(
        {EPOCHCTL_PATH, "snapshot", "status", epoch_file, "-w", format}, {}, seconds(30));
    const CommandResult theirs =
        test::RunEtcdctl(etcd_endpoint, {"snapshot", "status", etcd_file, "-w", format});
    INFO("-w " << format << "\nepochctl: " << mine.Describe()
               << "\netcdctl: " << theirs.Describe());
    CHECK((mine.exit_code == 0) == (theirs.exit_code == 0));
    CHECK(MaskValues(mine.out) == MaskValues(theirs.out));
  }
  // The count is the image's records: at least the five keys and their history.
  const CommandResult json = test::RunCommand(
      {EPOCHCTL_PATH, "snapshot", "status", epoch_file, "-w", "json"}, {}, seconds(30));
  REQUIRE(json.exit_code == 0);
  CHECK(std::stoll(JsonField(json.out, "totalKey")) >= 10);
  const CommandResult table = test::RunCommand(
      {EPOCHCTL_PATH, "snapshot", "status", epoch_file, "-w", "table"}, {}, seconds(30));
  CHECK(table.out.find("TOTAL KEYS") != std::string::npos);
}

TEST_CASE("epochctl check perf: etcdctl's workload, bar and verdict, shortened",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  const std::vector<std::string> env = {"EPOCH_CHECK_PERF_SECONDS=2"};
  const std::string endpoints = c.Endpoints();

  SECTION("refusals are etcdctl's") {
    REQUIRE(c.Etcdctl({"put", "/busy/k", "v"}).exit_code == 0);
    for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
             {"check", "perf", "--load", "huge"}, {"check", "perf", "--prefix", "/busy/"}}) {
      std::vector<std::string> argv = {EPOCHCTL_PATH, "--endpoints=" + endpoints};
      argv.insert(argv.end(), args.begin(), args.end());
      const CommandResult mine = test::RunCommand(argv, {}, seconds(30), env);
      const CommandResult theirs = c.Etcdctl(args);
      INFO("epochctl: " << mine.Describe() << "\netcdctl: " << theirs.Describe());
      CHECK(mine.exit_code == theirs.exit_code);
      CHECK(mine.err == theirs.err);
      CHECK(mine.out == theirs.out);
    }
  }

  SECTION("a whole run") {
    const CommandResult r =
        test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + endpoints, "check", "perf", "--prefix",
                          "/perf/", "--auto-compact", "--auto-defrag"},
                         {}, seconds(60), env);
    INFO(r.Describe());
    REQUIRE_FALSE(r.timed_out);
    // The progress line, off a terminal as etcdctl's (no bar): redrawn with \r from 0 to 2 of 2
    // seconds, then a newline.
    const std::size_t bar_end = r.out.find('\n');
    REQUIRE(bar_end != std::string::npos);
    const std::string bar = r.out.substr(0, bar_end);
    CHECK(bar.rfind("\r 0 / 2    0.00%", 0) == 0);
    CHECK(bar.find("\r 1 / 2   50.00% 00m01s") != std::string::npos);
    CHECK(bar.substr(bar.rfind('\r')) == "\r 2 / 2  100.00% 2s");
    std::vector<std::string> lines = Lines(r.out.substr(bar_end + 1));
    std::vector<std::string> expected_start = {"^Compacting with revision \\d+$",
                                               "^Compacted with revision \\d+$"};
    for (int i = 0; i < c.size(); ++i) {
      const std::string ep = c.node(i).client_address();
      expected_start.push_back("^Defragmenting \"" + ep + "\"$");
      expected_start.push_back("^Defragmented \"" + ep + "\"$");
    }
    const std::vector<std::string> verdicts = {
        "^(PASS: Throughput is|FAIL: Throughput too low:) \\d+ writes/s$",
        "^(PASS: Slowest request took|Slowest request took too long:) \\d+\\.\\d{6}s$",
        "^(PASS: Stddev is|Stddev too high:) \\d+\\.\\d{6}s$", "^(PASS|FAIL)$"};
    expected_start.insert(expected_start.end(), verdicts.begin(), verdicts.end());
    REQUIRE(lines.size() == expected_start.size());
    for (std::size_t i = 0; i < lines.size(); ++i) {
      INFO(lines[i] << " ~ " << expected_start[i]);
      CHECK(std::regex_match(lines[i], std::regex(expected_start[i])));
    }
    // PASS exits 0, FAIL exits 1 with no error line; a FAIL names what failed.
    const bool passed = lines.back() == "PASS";
    CHECK(r.exit_code == (passed ? 0 : 1));
    CHECK(r.err.empty());
    if (!passed) {
      CHECK(std::any_of(lines.begin(), lines.end() - 1,
                        [](const std::string& l) { return l.rfind("PASS", 0) != 0; }));
    }
    // The keys are gone.
    CHECK(EtcdctlOk(c, {"get", "/perf/", "--prefix", "--keys-only"}).empty());
  }
}

TEST_CASE("epochctl watch -- CMD runs the command for every event as etcdctl does",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  const std::string endpoint = "--endpoints=" + c.node(0).client_address();
  const std::string script = WriteEnvScript(c.dir());
  // The writes every watch below sees: a quote and a blank, bytes Go's %q escapes, a delete.
  // Each is awaited in both outputs (`await`) before the next, so that each event comes in a
  // response of its own to both tools: ETCD_WATCH_REVISION is the response's header revision,
  // the same for every event of a batch, and how a server batches a catching-up watch is timing.
  const auto write_events = [&](const std::string& key, const std::function<void()>& await) {
    REQUIRE(c.Etcdctl({"put", key, "a\"b c"}).exit_code == 0);
    await();
    REQUIRE(c.Etcdctl({"put", key}, "x\x01\xffy\n\t").exit_code == 0);
    await();
    REQUIRE(c.Etcdctl({"del", key}).exit_code == 0);
    await();
  };
  // Waits until both tools printed the same, more than before; returns that size.
  const auto same_past = [](Interactive& mine, Interactive& theirs, std::size_t before) {
    const bool same = Eventually(
        [&] {
          const std::string out = mine.Out();
          return out.size() > before && out == theirs.Out();
        },
        seconds(20), kProcessPoll);
    INFO("epochctl:\n"
         << mine.Out() << mine.Err() << "\netcdctl:\n"
         << theirs.Out() << theirs.Err());
    REQUIRE(same);
    return mine.Out().size();
  };
  // Both tools' stdout once each printed `lines` lines; compared.
  const auto same_output = [](Interactive& mine, Interactive& theirs, std::size_t lines) {
    const bool same =
        Eventually([&] { return Lines(mine.Out()).size() >= lines && mine.Out() == theirs.Out(); },
                   seconds(20), kProcessPoll);
    INFO("epochctl:\n"
         << mine.Out() << mine.Err() << "\netcdctl:\n"
         << theirs.Out() << theirs.Err());
    CHECK(same);
  };

  SECTION("on the command line: the events, then the command's output per event") {
    for (const std::string format : {"simple", "json"}) {
      INFO("-w " << format);
      const std::string rev = std::to_string(NextRevision(c));
      const std::vector<std::string> args = {"watch", "-w", format, "wc/k",     "--rev",
                                             rev,     "--", script, "--prefix", "x"};
      std::vector<std::string> mine_argv = {EPOCHCTL_PATH, endpoint};
      std::vector<std::string> theirs_argv = {test::kEtcdctlPath, endpoint};
      mine_argv.insert(mine_argv.end(), args.begin(), args.end());
      theirs_argv.insert(theirs_argv.end(), args.begin(), args.end());
      Interactive mine(mine_argv, c.dir(), "epochctl-exec-" + format);
      Interactive theirs(theirs_argv, c.dir(), "etcdctl-exec-" + format, {"ETCDCTL_API=3"});
      std::size_t seen = 0;
      write_events("wc/k", [&] { seen = same_past(mine, theirs, seen); });
      // simple: 3 lines per event and the script's; json: one line per response and the script's.
      same_output(mine, theirs, format == "simple" ? 12 : 6);
      const std::string out = mine.Out();
      CHECK(out.find(fmt::format(
                "rev={} key=\"wc/k\" type=\"PUT\" value=\"a\\\"b c\" args=--prefix x\n", rev)) !=
            std::string::npos);
      CHECK(out.find("value=\"x\\x01\\xffy") != std::string::npos);
      CHECK(out.find("type=\"DELETE\" value=\"\"") != std::string::npos);
      CHECK(mine.Err().empty());
    }
  }

  SECTION("ETCDCTL_WATCH_KEY and ETCDCTL_WATCH_RANGE_END name the range") {
    const std::string rev = std::to_string(NextRevision(c));
    const std::vector<std::string> env = {"ETCDCTL_WATCH_KEY=wc/r1",
                                          "ETCDCTL_WATCH_RANGE_END=wc/r3"};
    Interactive mine({EPOCHCTL_PATH, endpoint, "watch", "--rev", rev, "--", script}, c.dir(),
                     "epochctl-env", env);
    std::vector<std::string> theirs_env = env;
    theirs_env.push_back("ETCDCTL_API=3");
    Interactive theirs({test::kEtcdctlPath, endpoint, "watch", "--rev", rev, "--", script}, c.dir(),
                       "etcdctl-env", theirs_env);
    std::size_t seen = 0;
    write_events("wc/r2", [&] { seen = same_past(mine, theirs, seen); });
    same_output(mine, theirs, 12);
  }

  SECTION("in watch -i lines") {
    WatchPair w(c, "simple", "exec");
    const std::string rev = std::to_string(NextRevision(c));
    w.Write(fmt::format("watch --rev {} wc/i -- {} \"two words\" --rev\n", rev, script));
    std::size_t seen = 0;
    write_events("wc/i", [&] { seen = w.SameOutputPast(seen).size(); });
    const bool same = Eventually(
        [&] { return Lines(w.epoch.Out()).size() >= 12 && w.epoch.Out() == w.etcd.Out(); },
        seconds(20), kProcessPoll);
    INFO("epochctl:\n" << w.epoch.Out() << "\netcdctl:\n" << w.etcd.Out());
    CHECK(same);
    CHECK(w.epoch.Out().find("args=two words --rev\n") != std::string::npos);
    // A line with a command but no key goes on, as etcdctl's.
    w.Write("watch -- echo hi\n");
    w.CloseStdin();
    CHECK(w.epoch.WaitExit() == w.etcd.WaitExit());
    CHECK(w.epoch.Err() == w.etcd.Err());
    CHECK(w.epoch.Err() ==
          "Invalid command watch -- echo hi (bad number of arguments)\n"
          "Error: Error reading watch request line: EOF\n");
  }

  SECTION("a command that fails ends the watch with etcdctl's line and status 1") {
    for (const std::string command : {"false", "no-such-command-for-watch"}) {
      for (const bool interactive : {false, true}) {
        INFO(command << (interactive ? " in watch -i" : ""));
        const std::string rev = std::to_string(NextRevision(c));
        std::vector<std::string> args = {"watch", "wc/f", "--rev", rev, "--", command};
        std::string input;
        if (interactive) {
          input = fmt::format("watch wc/f --rev {} -- {}\n", rev, command);
          args = {"watch", "-i"};
        }
        std::vector<std::string> mine_argv = {EPOCHCTL_PATH, endpoint};
        std::vector<std::string> theirs_argv = {test::kEtcdctlPath, endpoint};
        mine_argv.insert(mine_argv.end(), args.begin(), args.end());
        theirs_argv.insert(theirs_argv.end(), args.begin(), args.end());
        const std::string tag = command + (interactive ? "-i" : "");
        Interactive mine(mine_argv, c.dir(), "epochctl-fail-" + tag);
        Interactive theirs(theirs_argv, c.dir(), "etcdctl-fail-" + tag, {"ETCDCTL_API=3"});
        mine.Write(input);
        theirs.Write(input);
        REQUIRE(c.Etcdctl({"put", "wc/f", "v"}).exit_code == 0);
        const std::optional<int> mine_exit = mine.WaitExit();
        const std::optional<int> theirs_exit = theirs.WaitExit();
        INFO("epochctl: " << mine.Out() << mine.Err() << "\netcdctl: " << theirs.Out()
                          << theirs.Err());
        CHECK(mine_exit == std::optional<int>(1));
        CHECK(mine_exit == theirs_exit);
        CHECK(mine.Out() == theirs.Out());
        CHECK(mine.Err() == theirs.Err());
      }
    }
  }

  SECTION("the argument refusals are etcdctl's") {
    const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> cases = {
        {{"watch", "k", "--"}, {}},
        {{"watch", "--"}, {}},
        {{"watch"}, {}},
        {{"watch", "--", "echo", "hi"}, {}},
        {{"watch", "--rev", "1", "--", "echo"}, {}},
        {{"watch", "--prefix", "--", "echo"}, {}},
        {{"watch", "--prefix", "a", "b", "--", "echo", "hi"}, {}},
        {{"watch", "a", "b", "--prefix", "--", "echo"}, {}},
        {{"watch", "--prefix", "a", "b"}, {}},
        {{"watch", "k"}, {"ETCDCTL_WATCH_KEY=k"}},
        {{"watch", "k", "--", "echo", "1"}, {"ETCDCTL_WATCH_KEY=k"}},
        {{"watch", "k"}, {"ETCDCTL_WATCH_RANGE_END=z"}},
        {{"watch", "-i"}, {"ETCDCTL_WATCH_RANGE_END=z"}},
    };
    for (const auto& [args, env] : cases) {
      INFO(fmt::format("{} {}", fmt::join(env, " "), fmt::join(args, " ")));
      std::vector<std::string> mine_argv = {EPOCHCTL_PATH, endpoint};
      std::vector<std::string> theirs_argv = {test::kEtcdctlPath, endpoint};
      mine_argv.insert(mine_argv.end(), args.begin(), args.end());
      theirs_argv.insert(theirs_argv.end(), args.begin(), args.end());
      std::vector<std::string> theirs_env = env;
      theirs_env.push_back("ETCDCTL_API=3");
      const CommandResult mine = test::RunCommand(mine_argv, {}, seconds(20), env);
      const CommandResult theirs = test::RunCommand(theirs_argv, {}, seconds(20), theirs_env);
      INFO("epochctl: " << mine.Describe() << "\netcdctl: " << theirs.Describe());
      CHECK(mine.exit_code == 128);
      CHECK(mine.exit_code == theirs.exit_code);
      CHECK(mine.err == theirs.err);
      CHECK(mine.out == theirs.out);
    }
  }
}

TEST_CASE("epochctl check datascale: etcdctl's lines and exit status, shortened",
          "[integration][epochctl][parity]") {
  auto cluster = StartCluster();
  REQUIRE(cluster->WaitHealthy(seconds(20)).ok());
  const TestCluster& c = *cluster;
  const std::vector<std::string> env = {"EPOCH_CHECK_DATASCALE_KEYS=300"};
  const std::string endpoints = c.Endpoints();

  SECTION("refusals are etcdctl's") {
    REQUIRE(c.Etcdctl({"put", "/busy/k", "v"}).exit_code == 0);
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"check", "datascale", "--load", "huge"},
                                               {"check", "datascale", "--prefix", "/busy/"}}) {
      std::vector<std::string> argv = {EPOCHCTL_PATH, "--endpoints=" + endpoints};
      argv.insert(argv.end(), args.begin(), args.end());
      const CommandResult mine = test::RunCommand(argv, {}, seconds(30), env);
      const CommandResult theirs = c.Etcdctl(args);
      INFO("epochctl: " << mine.Describe() << "\netcdctl: " << theirs.Describe());
      CHECK(mine.exit_code != 0);
      CHECK(mine.exit_code == theirs.exit_code);
      CHECK(mine.err == theirs.err);
      CHECK(mine.out == theirs.out);
    }
  }

  SECTION("a whole run") {
    const CommandResult r =
        test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + endpoints, "check", "datascale", "--load",
                          "m", "--prefix", "/scale/", "--auto-compact", "--auto-defrag"},
                         {}, seconds(120), env);
    INFO(r.Describe());
    REQUIRE_FALSE(r.timed_out);
    const std::vector<std::string> lines = Lines(r.out);
    REQUIRE(lines.size() >= 2);
    CHECK(lines[0] ==
          "Start data scale check for work load [300 key-value pairs, 1024 bytes per "
          "key-value, 200 concurrent clients].");
    // The progress line over the count, off a terminal (no bar): redrawn with \r, ending at
    // 300 of 300 with the time taken.
    const std::string& bar = lines[1];
    CHECK(bar.rfind("\r 0 / 300    0.00%", 0) == 0);
    CHECK(
        std::regex_match(bar.substr(bar.rfind('\r')), std::regex("\r 300 / 300  100\\.00% \\d+s")));
    std::vector<std::string> expected = {"^Compacting with revision \\d+$",
                                         "^Compacted with revision \\d+$"};
    for (int i = 0; i < c.size(); ++i) {
      const std::string ep = c.node(i).client_address();
      expected.push_back("^Defragmenting \"" + ep + "\"$");
      expected.push_back("^Defragmented \"" + ep + "\"$");
    }
    expected.push_back("^PASS: Approximate system memory used : -?\\d+\\.\\d\\d MB\\.$");
    REQUIRE(lines.size() == expected.size() + 2);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      INFO(lines[i + 2] << " ~ " << expected[i]);
      CHECK(std::regex_match(lines[i + 2], std::regex(expected[i])));
    }
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(EtcdctlOk(c, {"get", "/scale/", "--prefix", "--keys-only"}).empty());
  }

  SECTION("etcdctl's own run against Epoch prints the same lines") {
    const CommandResult theirs = c.Etcdctl({"check", "datascale", "--prefix", "/scale-etcdctl/"},
                                           {}, std::nullopt, seconds(180));
    const CommandResult mine =
        test::RunCommand({EPOCHCTL_PATH, "--endpoints=" + endpoints, "check", "datascale",
                          "--prefix", "/scale-epochctl/"},
                         {}, seconds(120), {"EPOCH_CHECK_DATASCALE_KEYS=10000"});
    INFO("epochctl: " << mine.Describe() << "\netcdctl: " << theirs.Describe());
    CHECK(mine.exit_code == theirs.exit_code);
    // The first line, the last progress line and the verdict, figures masked.
    const auto shape = [](const std::string& out) {
      std::vector<std::string> lines = Lines(out);
      if (lines.size() > 1) lines[1] = lines[1].substr(lines[1].rfind('\r'));
      for (std::string& line : lines) {
        line = std::regex_replace(line, std::regex(" \\d+s$"), " Ns");
        line = std::regex_replace(line, std::regex("-?\\d+\\.\\d\\d MB"), "X MB");
      }
      return lines;
    };
    CHECK(shape(mine.out) == shape(theirs.out));
    CHECK(mine.err == theirs.err);
  }
}

}  // namespace epoch::integration
