// The lines of `watch -i` (etcdctl 3.4's interactive watch,
// etcdctl/ctlv3/command/watch_command.go):
//
//   watch [--prefix] [--rev N] [--prev-kv] [-i] <key or prefix> [range_end]
//   progress
//
// A line is split into words as etcdctl's argify does ("..." Go-quoted, '...' verbatim, else up
// to the next blank), its flags are parsed as pflag does (interspersed with the arguments,
// `--flag=value` or `--flag value`, `--` ends the flags), and every outcome carries etcdctl's
// text: a line etcdctl answers with "Invalid command ..." on stderr and goes on, and one it exits
// on (exit status 128, "Error: <why>": an unknown flag, a bad flag value, no key).
//
// Threading: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::ctl {

struct WatchLine {
  enum class Kind {
    kWatch,     // start the watch below
    kProgress,  // ask the stream for a progress notification
    kInvalid,   // print `message` on stderr and read the next line
    kFatal,     // exit 128 with "Error: <message>"
  };
  Kind kind = Kind::kInvalid;
  std::string message;
  // kWatch: what to watch. range_end is set only with two arguments (etcdctl ignores a third).
  std::string key;
  std::string range_end;
  bool prefix = false;
  bool prev_kv = false;
  std::int64_t rev = 0;
};

// The words of `line` as etcdctl's argify splits them.
std::vector<std::string> Argify(const std::string& line);

// What etcdctl 3.4 does with one line read by `watch -i` (the trailing newline removed).
WatchLine ParseWatchLine(const std::string& line);

}  // namespace epoch::ctl
