// epochd's logging: the zap-style JSON lines (JsonLogFormatter), read back with protobuf's JSON
// parser; etcd's --logger / --log-level / --log-outputs checks; SetUpLogging writing to files.
#include "logging.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "json_log_formatter.h"
#include "node_flags.h"

namespace epoch::server {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

Struct ParseLine(const std::string& line) {
  Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(line, &parsed);
  INFO(line);
  REQUIRE(status.ok());
  return parsed;
}

const Value& FieldOf(const Struct& s, const std::string& key) {
  INFO(key);
  REQUIRE(s.fields().contains(key));
  return s.fields().at(key);
}

std::string Line(std::string_view payload, spdlog::level::level_enum level = spdlog::level::info,
                 spdlog::source_loc source = {}) {
  spdlog::details::log_msg msg(source, "", level, payload);
  return JsonLogLine(msg);
}

// Restores spdlog's default logger when a test that replaced it ends.
struct DefaultLoggerGuard {
  std::shared_ptr<spdlog::logger> saved = spdlog::default_logger();
  ~DefaultLoggerGuard() { spdlog::set_default_logger(saved); }
};

TEST_CASE("json log: level, ts, caller, msg and the key=value fields", "[daemon][logging]") {
  spdlog::source_loc here{"/work/x/server/replication/src/raft_driver.cc", 377, "OnSoftState"};
  Struct line = ParseLine(
      Line("leader changed node=8e9e05c52164694d term=7 leader=1234 previous-leader=0 role=leader",
           spdlog::level::info, here));
  CHECK(FieldOf(line, "level").string_value() == "info");
  CHECK(FieldOf(line, "caller").string_value() == "replication/raft_driver.cc:377");
  CHECK(FieldOf(line, "msg").string_value() == "leader changed");
  CHECK(FieldOf(line, "node").string_value() == "8e9e05c52164694d");
  CHECK(FieldOf(line, "term").number_value() == 7);
  // Member IDs stay strings even when their hex digits are all decimal.
  CHECK(FieldOf(line, "leader").string_value() == "1234");
  CHECK(FieldOf(line, "previous-leader").string_value() == "0");
  CHECK(FieldOf(line, "role").string_value() == "leader");
  const std::string ts = FieldOf(line, "ts").string_value();
  REQUIRE(ts.size() == std::string("2026-12-05T12:00:00.123456Z").size());
  CHECK(ts[10] == 'T');
  CHECK(ts.back() == 'Z');
  CHECK(line.fields().size() == 9);
}

TEST_CASE("json log: words around fields form msg; quoted values; no caller without a source",
          "[daemon][logging]") {
  Struct line = ParseLine(
      Line(R"(raft node=1 term=3 became candidate at term 3, name="n 1 \"x\"" index=12, done)",
           spdlog::level::warn));
  CHECK_FALSE(line.fields().contains("caller"));
  CHECK(FieldOf(line, "level").string_value() == "warn");
  CHECK(FieldOf(line, "msg").string_value() == "raft became candidate at term 3, done");
  CHECK(FieldOf(line, "name").string_value() == "n 1 \"x\"");
  CHECK(FieldOf(line, "index").number_value() == 12);  // the trailing comma is not the value's
}

TEST_CASE("json log: reserved and repeated keys stay text; hostile bytes are escaped",
          "[daemon][logging]") {
  Struct line = ParseLine(Line("msg=x level=y node=1 node=2 Key=3 a= =b", spdlog::level::err));
  CHECK(FieldOf(line, "level").string_value() == "error");
  CHECK(FieldOf(line, "msg").string_value() == "msg=x level=y node=2 Key=3 a= =b");
  CHECK(FieldOf(line, "node").string_value() == "1");
  CHECK(line.fields().size() == 4);  // level, ts, msg, node

  const std::string hostile = std::string("quote\" back\\ nl\n tab\t ctl\x01 bad\xff ok\xc3\xa9");
  Struct escaped = ParseLine(Line(hostile, spdlog::level::critical));
  CHECK(FieldOf(escaped, "level").string_value() == "fatal");
  CHECK(FieldOf(escaped, "msg").string_value() ==
        "quote\" back\\ nl\n tab\t ctl\x01 bad\xef\xbf\xbd ok\xc3\xa9");
  // An unterminated quote is text, not a field.
  Struct open = ParseLine(Line(R"(name="unterminated value)"));
  CHECK(FieldOf(open, "msg").string_value() == R"(name="unterminated value)");
}

TEST_CASE("logging options: etcd's loggers, levels and outputs", "[daemon][logging]") {
  CHECK(ValidateLogOptions({}).ok());
  CHECK(ValidateLogOptions({"capnslog", "debug", {"stdout", "stderr", "/tmp/x.log"}}).ok());
  CHECK(ValidateLogOptions({"zap", "info", {"systemd/journal"}}).ok());
  for (const char* level : {"debug", "info", "warn", "error", "dpanic", "panic", "fatal"}) {
    INFO(level);
    CHECK(LogLevelOf(level).ok());
  }
  CHECK(*LogLevelOf("error") == spdlog::level::err);
  CHECK(*LogLevelOf("fatal") == spdlog::level::critical);

  Status bad_logger = ValidateLogOptions({"json", "info", {"stderr"}});
  CHECK(bad_logger.message().find("--logger: unknown logger 'json'") != std::string::npos);
  Status bad_level = ValidateLogOptions({"zap", "verbose", {"stderr"}});
  CHECK(bad_level.message().find("--log-level: unknown level 'verbose'") != std::string::npos);
  Status journal_and_file = ValidateLogOptions({"zap", "info", {"systemd/journal", "/tmp/x"}});
  CHECK(journal_and_file.message().find("systemd/journal cannot be combined") != std::string::npos);
  CHECK_FALSE(ValidateLogOptions({"zap", "info", {}}).ok());
  CHECK_FALSE(ValidateLogOptions({"zap", "info", {""}}).ok());
}

TEST_CASE("logging flags: --logger, --log-level, --log-outputs comma separated",
          "[daemon][logging]") {
  CLI::App app{"t"};
  NodeFlags flags;
  NodeConfig config;
  AddNodeFlags(app, flags, config);
  app.parse(
      "--name n1 --data-dir /tmp/n1 --initial-cluster n1=127.0.0.1:2380 "
      "--log-outputs=stdout,/var/log/epoch.log --log-level warn --logger capnslog",
      false);
  CHECK(flags.log.logger == "capnslog");
  CHECK(flags.log.level == "warn");
  CHECK(flags.log.outputs == std::vector<std::string>{"stdout", "/var/log/epoch.log"});
  NodeFlags defaults;
  CHECK(defaults.log.logger == "zap");
  CHECK(defaults.log.outputs == std::vector<std::string>{"default"});
}

TEST_CASE("logging: zap writes JSON lines to every file output, at the chosen level",
          "[daemon][logging]") {
  DefaultLoggerGuard guard;
  test_support::TempDir dir("logging");
  const std::string a = dir.Sub("a.log");
  const std::string b = dir.Sub("b.log");
  auto warnings = SetUpLogging({"zap", "warn", {a, b}});
  REQUIRE(warnings.ok());
  CHECK(warnings->empty());
  SPDLOG_INFO("below the level node=1");
  SPDLOG_WARN("alarm raised node={} alarm={} index={}", "a1", "NOSPACE", 42);
  for (const std::string& path : {a, b}) {
    const std::string text = test_support::ReadFile(path);
    INFO(text);
    REQUIRE(text.find("below the level") == std::string::npos);
    REQUIRE(std::count(text.begin(), text.end(), '\n') == 1);
    Struct line = ParseLine(text.substr(0, text.size() - 1));
    CHECK(FieldOf(line, "msg").string_value() == "alarm raised");
    CHECK(FieldOf(line, "alarm").string_value() == "NOSPACE");
    CHECK(FieldOf(line, "index").number_value() == 42);
    CHECK(FieldOf(line, "caller").string_value().starts_with("daemon/logging_test.cc:"));
  }
}

TEST_CASE("logging: capnslog is accepted with a warning and writes plain lines",
          "[daemon][logging]") {
  DefaultLoggerGuard guard;
  test_support::TempDir dir("logging");
  const std::string path = dir.Sub("plain.log");
  auto warnings = SetUpLogging({"capnslog", "info", {path}});
  REQUIRE(warnings.ok());
  REQUIRE(warnings->size() == 1);
  CHECK(warnings->front().find("capnslog is deprecated") != std::string::npos);
  spdlog::info("leader changed node={:x} term={}", 0xabc, 4);
  const std::string text = test_support::ReadFile(path);
  CHECK(text.find(" info leader changed node=abc term=4\n") != std::string::npos);
  CHECK(text.find('{') == std::string::npos);
}

TEST_CASE("logging: an output file that cannot be opened is an error naming it",
          "[daemon][logging]") {
  DefaultLoggerGuard guard;
  auto result = SetUpLogging({"zap", "info", {"/proc/no-such-dir/epoch.log"}});
  REQUIRE_FALSE(result.ok());
  CHECK(result.status().message().find("--log-outputs: cannot open /proc/no-such-dir/epoch.log") !=
        std::string::npos);
}

}  // namespace
}  // namespace epoch::server
