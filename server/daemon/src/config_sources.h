// Where epochd's settings come from, with etcd 3.4's rules, so an etcd deployment's config file
// and environment work unchanged:
// - `--config-file` (or EPOCH_CONFIG_FILE / ETCD_CONFIG_FILE) names etcd's YAML configuration
//   file; when it is given, every other command-line flag and environment variable is ignored
//   (with a warning naming each), as etcd ignores them.
// - Otherwise the command line wins over EPOCH_<FLAG> variables, which win over ETCD_<FLAG>
//   variables (the flag's name in capitals, '-' as '_': ETCD_INITIAL_CLUSTER).
// Both are turned into command-line arguments for CLI11, so a setting is checked by the same
// flag definition whatever its source. docs/etcd-compatibility.md "Configuration" lists the YAML
// keys.
//
// Threading: used once, by main(), before anything starts.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::server {

using Environment = std::map<std::string, std::string>;

struct ResolvedArgs {
  std::vector<std::string> args;      // command-line arguments to parse, in order
  std::vector<std::string> warnings;  // settings ignored, for the log once it is set up
};

// `args` excludes the program name. `app` must have every flag registered (AddNodeFlags).
[[nodiscard]] Result<ResolvedArgs> ResolveArgs(const CLI::App& app,
                                               const std::vector<std::string>& args,
                                               const Environment& env);

// etcd's YAML config file `text` as arguments: a key is a flag's name, the *-transport-security
// maps hold the TLS flags, and etcd keys epochd has no flag for are accepted only with values
// that change nothing; any other key is refused with a message that names it. `origin` names the
// file in messages. Warnings (keys accepted but without effect) go to `warnings`.
[[nodiscard]] Result<std::vector<std::string>> FlagsFromEtcdYaml(
    const CLI::App& app, const std::string& text, const std::string& origin,
    std::vector<std::string>* warnings);

// The process environment (`environ`) as a map.
Environment EnvironmentFrom(char** environ_list);

}  // namespace epoch::server
