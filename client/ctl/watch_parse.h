// The arguments of `watch` (etcdctl 3.4's, etcdctl/ctlv3/command/watch_command.go) on the
// command line and in the lines of `watch -i`:
//
//   watch [--prefix] [--rev N] [--prev-kv] [-i] [key or prefix] [range_end] [-- cmd args...]
//   progress
//
// After "--" comes a command etcdctl runs for every event. The watch's own arguments are those
// before the command's first word: the words the flag parser kept are cut at the last occurrence
// of that word, as etcdctl cuts them. ETCDCTL_WATCH_KEY (and ETCDCTL_WATCH_RANGE_END) stand for
// the key when the arguments give none; both at once is "found conflicting environment key".
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
  // kWatch: the command run for every event (the words after "--"); empty: none.
  std::vector<std::string> command;
};

// ETCDCTL_WATCH_KEY and ETCDCTL_WATCH_RANGE_END, read once by the command.
struct WatchEnv {
  std::string key;
  std::string range_end;
};

// etcdctl's check of the two before anything else: a range end without a key is refused (exit
// 128).
Status CheckWatchEnv(const WatchEnv& env);

// The words of `line` as etcdctl's argify splits them.
std::vector<std::string> Argify(const std::string& line);

// What etcdctl 3.4 does with one line read by `watch -i` (the trailing newline removed).
WatchLine ParseWatchLine(const std::string& line, const WatchEnv& env = {});

// What etcdctl 3.4 watches and runs for `watch` on its command line: `after_watch` holds the
// command line's words after its first "watch" (as typed: flags, "--" and all), `args` the
// positional arguments the flag parser kept (the words after "--" included, "--" not), `prefix`
// the --prefix flag. kWatch (key, range_end, command; the flags are the caller's) or kFatal (exit
// 128 with etcdctl's message).
WatchLine ParseWatchCommandLine(const std::vector<std::string>& after_watch,
                                const std::vector<std::string>& args, bool prefix,
                                const WatchEnv& env);

}  // namespace epoch::ctl
