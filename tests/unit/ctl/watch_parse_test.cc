// `watch -i` lines as etcdctl 3.4 reads them (watch_parse.h): words, flags, and the outcome with
// etcdctl's text for each kind of line.
#include "watch_parse.h"

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
  // "--" ends the flags; what follows is a command etcdctl runs per event, epochctl does not.
  w = ParseWatchLine("watch k -- echo hi");
  CHECK(w.kind == Kind::kInvalid);
  CHECK(w.message ==
        "Invalid command watch k -- echo hi (epochctl does not run a command per event)");
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
