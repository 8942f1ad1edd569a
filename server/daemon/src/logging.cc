#include "logging.h"

#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/sinks/systemd_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "json_log_formatter.h"

namespace epoch::server {
namespace {

constexpr std::string_view kJournal = "systemd/journal";

Result<spdlog::sink_ptr> SinkFor(const std::string& output) {
  if (output == "default" || output == "stderr") {
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::stderr_sink_mt>());
  }
  if (output == "stdout")
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::stdout_sink_mt>());
  // The journal keeps its own time and level; it gets the record's text and source location.
  if (output == kJournal) {
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::systemd_sink_mt>("epochd", false));
  }
  try {
    return spdlog::sink_ptr(std::make_shared<spdlog::sinks::basic_file_sink_mt>(output));
  } catch (const spdlog::spdlog_ex& e) {
    return Status::IOError(fmt::format("--log-outputs: cannot open {}: {}", output, e.what()));
  }
}

}  // namespace

Result<spdlog::level::level_enum> LogLevelOf(const std::string& level) {
  using spdlog::level::level_enum;
  static const std::vector<std::pair<std::string_view, level_enum>> kLevels = {
      {"trace", level_enum::trace},    {"debug", level_enum::debug},
      {"info", level_enum::info},      {"warn", level_enum::warn},
      {"error", level_enum::err},      {"dpanic", level_enum::critical},
      {"panic", level_enum::critical}, {"fatal", level_enum::critical},
  };
  for (const auto& [name, value] : kLevels) {
    if (level == name) return value;
  }
  return Status::InvalidArgument(fmt::format(
      "--log-level: unknown level '{}' (debug, info, warn, error, dpanic, panic, fatal)", level));
}

Status ValidateLogOptions(const LogOptions& options) {
  if (options.logger != "zap" && options.logger != "capnslog") {
    return Status::InvalidArgument(fmt::format(
        "--logger: unknown logger '{}' (zap, or the deprecated capnslog)", options.logger));
  }
  auto level = LogLevelOf(options.level);
  if (!level.ok()) return level.status();
  if (options.outputs.empty()) return Status::InvalidArgument("--log-outputs: no output given");
  for (const std::string& output : options.outputs) {
    if (output.empty()) return Status::InvalidArgument("--log-outputs: an output is empty");
  }
  const bool journal =
      std::find(options.outputs.begin(), options.outputs.end(), kJournal) != options.outputs.end();
  if (journal && options.outputs.size() > 1) {
    return Status::InvalidArgument(
        "--log-outputs: systemd/journal cannot be combined with other outputs (as in etcd)");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> SetUpLogging(const LogOptions& options) {
  EPOCH_RETURN_IF_ERROR(ValidateLogOptions(options));
  std::vector<spdlog::sink_ptr> sinks;
  for (const std::string& output : options.outputs) {
    auto sink = SinkFor(output);
    if (!sink.ok()) return sink.status();
    sinks.push_back(*std::move(sink));
  }
  auto logger = std::make_shared<spdlog::logger>("", sinks.begin(), sinks.end());
  std::vector<std::string> warnings;
  if (options.logger == "zap") {
    logger->set_formatter(std::make_unique<JsonLogFormatter>());
  } else {
    logger->set_pattern(kPlainLogPattern);
    warnings.push_back(
        "--logger=capnslog is deprecated (as in etcd 3.4): it writes plain text lines; use "
        "--logger=zap for JSON lines");
  }
  logger->set_level(*LogLevelOf(options.level));
  // Every line reaches its file at once: what a crashed member logged last is what matters most.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
  return warnings;
}

}  // namespace epoch::server
