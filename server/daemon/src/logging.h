// epochd's logging setup from etcd's flags `--logger`, `--log-level`, `--log-outputs`
// (docs/logging.md): spdlog's default logger, which every layer of the server logs through.
//
//   --logger       zap       one JSON object per line (JsonLogFormatter, etcd's zap fields)
//                  capnslog  plain text lines (etcd 3.4's deprecated logger; accepted with a
//                            warning, as etcd 3.4 warns)
//   --log-level    debug, info, warn, error, panic, fatal (etcd's; dpanic too), and trace
//   --log-outputs  default (= stderr), stderr, stdout, systemd/journal, or file paths (appended
//                  to); several comma separated; systemd/journal only alone, as in etcd
//
// Threading: SetUpLogging runs once, in main(), before any other thread starts; spdlog's loggers
// and sinks are thread-safe after that.
#pragma once

#include <spdlog/common.h>

#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::server {

struct LogOptions {
  std::string logger = "zap";
  std::string level = "info";
  std::vector<std::string> outputs = {"default"};
};

// The plain format's pattern (--logger=capnslog).
inline constexpr const char* kPlainLogPattern = "%Y-%m-%dT%H:%M:%S.%e %l %v";

// spdlog's level for an etcd --log-level value; InvalidArgument naming the flag otherwise.
[[nodiscard]] Result<spdlog::level::level_enum> LogLevelOf(const std::string& level);
// Checks the three flags together; the message names the flag and the value to fix.
[[nodiscard]] Status ValidateLogOptions(const LogOptions& options);
// Replaces spdlog's default logger with one writing to the outputs in the chosen format, and
// returns the warnings to log (capnslog's deprecation). IOError when a file cannot be opened.
[[nodiscard]] Result<std::vector<std::string>> SetUpLogging(const LogOptions& options);

}  // namespace epoch::server
