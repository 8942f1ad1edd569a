// JsonLogFormatter: spdlog's formatter for `--logger=zap`, writing each record as one JSON line in
// the shape of etcd's zap logger (docs/logging.md):
//
//   {"level":"info","ts":"2026-12-05T12:00:00.123456Z","caller":"replication/raft_driver.cc:377",
//    "msg":"leader changed","node":"8e9e05c52164694d","term":2,"leader":"8e9e05c52164694d"}
//
// - "level": zap's names (debug, info, warn, error, fatal; spdlog's trace is "debug").
// - "ts": UTC, ISO 8601 with microseconds.
// - "caller": the call site's module (its directory, or the one above src/), file and line, when
//   the record has a source location (the SPDLOG_INFO/... macros); omitted when it has none.
// - "msg" and the fields: a record's text follows the logging convention of docs/conventions.md
//   §5, `key=value` fields among words. Every `key=value` token (key: a lower-case letter, then
//   lower-case letters, digits, '-', '_' or '.'; value: up to the next space, or a "quoted"
//   string with \", \\, \n, \t, \r escapes as fmt's "{:?}" writes it) becomes a field; the
//   remaining words, in order, are "msg". A value is a JSON number when it is a decimal integer,
//   except for the keys that name members (IdKey()), whose hexadecimal IDs are always strings. A
//   key that repeats, or that is one of level/ts/caller/msg, stays in the text. A trailing ',' or
//   ';' ends an unquoted value.
// - Strings are escaped as JSON requires; bytes that are not UTF-8 become U+FFFD.
//
// Threading: spdlog calls format() under its sink's lock; the formatter has no state.
#pragma once

#include <spdlog/formatter.h>

#include <memory>
#include <string>
#include <string_view>

namespace epoch::server {

class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  [[nodiscard]] std::unique_ptr<spdlog::formatter> clone() const override;
};

// The JSON object of one record without its trailing newline (what format() writes, less '\n').
[[nodiscard]] std::string JsonLogLine(const spdlog::details::log_msg& msg);

// Whether a field with this key holds a member ID (always a JSON string).
[[nodiscard]] bool IdKey(std::string_view key);

}  // namespace epoch::server
