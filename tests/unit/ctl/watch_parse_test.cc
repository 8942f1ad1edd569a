// `watch -i` lines as etcdctl 3.4 reads them (watch_parse.h): words, flags, and the outcome with
// etcdctl's text for each kind of line.
#include "watch_parse.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>

namespace epoch::ctl {
namespace {

using Kind = WatchLine::Kind;

TEST_CASE("watch -i: lines split as etcdctl's argify splits them", "[ctl]") {
  CHECK(Argify("watch  a   b") == std::vector<std::string>{"watch", "a", "b"});
  CHECK(Argify("watch \"a b\\n\" 'c d'") == std::vector<std::string>{"watch", "a b\n", "c d"});
  CHECK(Argify("").empty());
  CHECK(Argify("watch x").size() == 2);
}

TEST_CASE("watch -i: a watch line's key, range and flags", "[ctl]") {
  WatchLine w = ParseWatchLine("watch k");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "k");
  CHECK(w.range_end.empty());
  CHECK_FALSE(w.prefix);
  w = ParseWatchLine("watch --prefix p/ --rev 7 --prev-kv");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "p/");
  CHECK(w.prefix);
  CHECK(w.prev_kv);
  CHECK(w.rev == 7);
  w = ParseWatchLine("watch a c --rev=0x10 --prefix=false -i");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.range_end == "c");
  CHECK(w.rev == 16);
  CHECK_FALSE(w.prefix);
  // etcdctl watches the first key alone when given three.
  w = ParseWatchLine("watch a b c");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.range_end.empty());
  CHECK(ParseWatchLine("progress").kind == Kind::kProgress);
  // "--" ends the flags; what follows is the command run for every event.
  w = ParseWatchLine("watch k -- echo hi --prefix");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "k");
  CHECK_FALSE(w.prefix);
  CHECK(w.command == std::vector<std::string>{"echo", "hi", "--prefix"});
  w = ParseWatchLine("watch --rev 3 a b --prev-kv -- sh -c \"echo x\"");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.range_end == "b");
  CHECK(w.prev_kv);
  CHECK(w.command == std::vector<std::string>{"sh", "-c", "echo x"});
  // etcdctl cuts the watch's arguments at the last word equal to the command's first.
  w = ParseWatchLine("watch a echo -- echo hi");
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "a");
  CHECK(w.range_end == "echo");
}

TEST_CASE("watch -i: ETCDCTL_WATCH_KEY stands for the key", "[ctl]") {
  const WatchEnv env{"ek", ""};
  WatchLine w = ParseWatchLine("watch", env);
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "ek");
  w = ParseWatchLine("watch --prefix -- echo hi", WatchEnv{"ek", "ez"});
  REQUIRE(w.kind == Kind::kInvalid);  // key and range end with --prefix
  w = ParseWatchLine("watch k", env);
  CHECK(w.kind == Kind::kFatal);
  CHECK(w.message == "bad number of arguments (found conflicting environment key)");
  CHECK(CheckWatchEnv(WatchEnv{"", "z"}).message() ==
        "ETCDCTL_WATCH_KEY is empty but got ETCDCTL_WATCH_RANGE_END=\"z\"");
  CHECK(CheckWatchEnv(WatchEnv{"k", "z"}).ok());
}

// `watch` on the command line: the words after "watch" as typed, and the positional arguments
// the flag parser kept.
TEST_CASE("watch: the command line's key, range end and command, as etcdctl splits them", "[ctl]") {
  using Words = std::vector<std::string>;
  WatchLine w = ParseWatchCommandLine({"k", "--", "echo", "hi"}, {"k", "echo", "hi"}, false, {});
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "k");
  CHECK(w.range_end.empty());
  CHECK(w.command == Words{"echo", "hi"});
  w = ParseWatchCommandLine({"a", "--rev", "2", "b", "--", "printenv"}, {"a", "b", "printenv"},
                            false, {});
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.range_end == "b");
  CHECK(w.command == Words{"printenv"});
  // Three arguments: the first key alone, as etcdctl.
  w = ParseWatchCommandLine({"a", "b", "c", "--", "echo"}, {"a", "b", "c", "echo"}, false, {});
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.range_end.empty());
  // No command.
  w = ParseWatchCommandLine({"a", "b"}, {"a", "b"}, false, {});
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.command.empty());
  // ETCDCTL_WATCH_KEY and range end before the arguments.
  w = ParseWatchCommandLine({"--", "echo", "hi"}, {"echo", "hi"}, false, WatchEnv{"ek", "ez"});
  REQUIRE(w.kind == Kind::kWatch);
  CHECK(w.key == "ek");
  CHECK(w.range_end == "ez");
  CHECK(w.command == Words{"echo", "hi"});
}

TEST_CASE("watch: the command lines etcdctl refuses, with its words", "[ctl]") {
  struct Case {
    std::vector<std::string> typed;
    std::vector<std::string> args;
    bool prefix;
    WatchEnv env;
    const char* why;
  };
  const Case cases[] = {
      {{"k", "--"},
       {"k"},
       false,
       {},
       "bad number of arguments (found separator --, but no commands)"},
      {{"--"}, {}, false, {}, "bad number of arguments (found separator --, but no commands)"},
      {{}, {}, false, {}, "bad number of arguments"},
      {{"--", "echo", "hi"}, {"echo", "hi"}, false, {}, "bad number of arguments"},
      {{"--rev", "1", "--", "echo"}, {"echo"}, false, {}, "bad number of arguments"},
      {{"--prefix"}, {}, true, {}, "bad number of arguments"},
      {{"--prefix", "a", "b", "--", "echo"},
       {"a", "b", "echo"},
       true,
       {},
       "`range_end` and `--prefix` are mutually exclusive"},
      {{"k"},
       {"k"},
       false,
       {"ek", ""},
       "bad number of arguments (found conflicting environment key)"},
      {{"k", "--", "echo", "1"},
       {"k", "echo", "1"},
       false,
       {"ek", ""},
       "bad number of arguments (found conflicting environment key)"},
  };
  for (const Case& c : cases) {
    INFO(fmt::format("{}", fmt::join(c.typed, " ")));
    const WatchLine w = ParseWatchCommandLine(c.typed, c.args, c.prefix, c.env);
    CHECK(w.kind == Kind::kFatal);
    CHECK(w.message == c.why);
  }
}

TEST_CASE("watch -i: the lines etcdctl refuses and goes on after", "[ctl]") {
  const std::pair<const char*, const char*> cases[] = {
      {"", "Invalid command:  (watch and progress supported)"},
      {"watch", "Invalid command watch (command type or key is not provided)"},
      {"get k", "Invalid command get k (only support watch)"},
      {"watch -- --prefix", "Invalid command watch -- --prefix (bad number of arguments)"},
      {"watch a b --prefix",
       "Invalid command watch a b --prefix (`range_end` and `--prefix` are mutually exclusive)"},
  };
  for (const auto& [line, why] : cases) {
    INFO(line);
    const WatchLine w = ParseWatchLine(line);
    CHECK(w.kind == Kind::kInvalid);
    CHECK(w.message == why);
  }
}

TEST_CASE("watch -i: the lines etcdctl exits on, with pflag's words", "[ctl]") {
  const std::pair<const char*, const char*> cases[] = {
      {"watch k --progress-notify", "unknown flag: --progress-notify"},
      {"watch k --rev", "flag needs an argument: --rev"},
      {"watch k --rev x",
       "invalid argument \"x\" for \"--rev\" flag: strconv.ParseInt: parsing \"x\": invalid "
       "syntax"},
      {"watch k --prefix=maybe",
       "invalid argument \"maybe\" for \"--prefix\" flag: strconv.ParseBool: parsing \"maybe\": "
       "invalid syntax"},
      {"watch -x k", "unknown shorthand flag: 'x' in -x"},
      {"watch k --help", "pflag: help requested"},
      {"watch k --", "bad number of arguments (found separator --, but no commands)"},
      {"watch --bogus k --", "bad number of arguments (found separator --, but no commands)"},
      {"watch --prefix", "bad number of arguments"},
  };
  for (const auto& [line, why] : cases) {
    INFO(line);
    const WatchLine w = ParseWatchLine(line);
    CHECK(w.kind == Kind::kFatal);
    CHECK(w.message == why);
  }
}

}  // namespace
}  // namespace epoch::ctl
