#include "config_sources.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

namespace epoch::server {

namespace {

constexpr std::string_view kConfigFileFlag = "config-file";
constexpr std::array<std::string_view, 2> kEnvPrefixes = {"EPOCH_", "ETCD_"};  // first wins

// An etcd setting epochd has no flag for. It is accepted when its value is one of `accepted`
// (lower case; "" also matches a key left empty; no values = any value), because then leaving it
// out changes nothing; `note` says why, and is logged when `warn` is set. Any other value is
// refused, with `note` as the reason.
struct EtcdOnlyKey {
  std::string_view key;
  std::vector<std::string_view> accepted;
  bool warn;
  std::string_view note;
};

const std::vector<EtcdOnlyKey>& EtcdOnlyKeys() {
  static const std::vector<EtcdOnlyKey> keys = {
      {"wal-dir", {""}, false, "epochd keeps its WAL inside data-dir"},
      {"max-snapshots", {}, true, "epochd deletes snapshot files once a newer one is durable"},
      {"max-wals", {}, true, "epochd deletes WAL segments once a snapshot covers them"},
      {"cors", {"", "*"}, false, "epochd serves no HTTP API that browsers call"},
      {"host-whitelist", {"", "*"}, false, "epochd serves no HTTP API that browsers call"},
      {"discovery", {""}, false, "list every member in initial-cluster instead"},
      {"discovery-srv", {""}, false, "list every member in initial-cluster instead"},
      {"discovery-srv-name", {""}, false, "list every member in initial-cluster instead"},
      {"discovery-proxy", {""}, false, "list every member in initial-cluster instead"},
      {"discovery-fallback", {}, false, "used only with discovery"},
      {"enable-v2", {"false"}, false, "the v2 API is not served; set it to false"},
      {"enable-v2v3", {""}, false, "the v2 API is not served"},
      {"enable-pprof", {}, true, "epochd serves no Go profiling endpoints"},
      {"enable-grpc-gateway", {"false"}, false, "the HTTP/JSON gateway is not served"},
      {"proxy", {"off"}, false, "epochd does not run as a v2 proxy"},
      {"proxy-failure-wait", {}, false, "used only with proxy"},
      {"proxy-refresh-interval", {}, false, "used only with proxy"},
      {"proxy-dial-timeout", {}, false, "used only with proxy"},
      {"proxy-write-timeout", {}, false, "used only with proxy"},
      {"proxy-read-timeout", {}, false, "used only with proxy"},
      {"log-package-levels", {""}, false, "use log-level"},
      {"auto-compaction-mode", {}, false, "used only with auto-compaction-retention"},
      {"auto-compaction-retention",
       {"", "0"},
       false,
       "automatic compaction is not supported; compact with etcdctl compact"},
      {"metrics", {"basic", "extensive"}, true, "epochd serves one set of metrics"},
      {"grpc-keepalive-min-time", {}, true, "epochd uses gRPC's keepalive defaults"},
      {"grpc-keepalive-interval", {}, true, "epochd uses gRPC's keepalive defaults"},
      {"grpc-keepalive-timeout", {}, true, "epochd uses gRPC's keepalive defaults"},
      {"backend-batch-interval", {}, true, "epochd commits its store per Raft batch"},
      {"backend-batch-limit", {}, true, "epochd commits its store per Raft batch"},
      {"initial-election-tick-advance", {}, true, "epochd waits one election timeout"},
      {"unsafe-no-fsync", {"false"}, false, "epochd always syncs its WAL"},
  };
  return keys;
}

// Keys of etcd's client-transport-security / peer-transport-security maps -> epochd flags.
std::string TransportSecurityFlag(std::string_view section, std::string_view key) {
  const bool peer = section == "peer-transport-security";
  if (peer && (key == "allowed-cn" || key == "allowed-hostname")) {
    return fmt::format("peer-cert-{}", key);
  }
  return peer ? fmt::format("peer-{}", key) : std::string(key);
}

std::string ToLower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string EnvSuffix(std::string_view flag) {
  std::string out;
  for (char c : flag) out += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

// The long names of every option registered on `app`.
std::vector<std::string> FlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames().front() == "help") continue;
    names.push_back(opt->get_lnames().front());
  }
  return names;
}

bool HasFlag(const CLI::App& app, const std::string& name) {
  return app.get_option_no_throw("--" + name) != nullptr;
}

// A YAML value as flag text: scalars as written, sequences comma-joined, null as "".
Result<std::string> ValueText(const YAML::Node& node, const std::string& key,
                              const std::string& origin) {
  if (node.IsNull()) return std::string();
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) {
    std::string joined;
    for (const YAML::Node& item : node) {
      if (!item.IsScalar()) break;
      joined += (joined.empty() ? "" : ",") + item.Scalar();
    }
    return joined;
  }
  return Status::InvalidArgument(
      fmt::format("{}: key '{}' must be a value or a list of values", origin, key));
}

// One key of the file (from the top level or a transport-security map), as `--flag=value`.
Status AddKey(const CLI::App& app, const std::string& key, const std::string& flag,
              const YAML::Node& value, const std::string& origin, std::vector<std::string>* args,
              std::vector<std::string>* warnings) {
  Result<std::string> text = ValueText(value, key, origin);
  if (!text.ok()) return text.status();
  if (HasFlag(app, flag)) {
    if (!value.IsNull()) args->push_back(fmt::format("--{}={}", flag, *text));
    return Status::Ok();
  }
  const auto& known = EtcdOnlyKeys();
  auto it = std::find_if(known.begin(), known.end(),
                         [&](const EtcdOnlyKey& k) { return k.key == key || k.key == flag; });
  const std::string lowered = ToLower(*text);
  const bool is_off = lowered.empty() || lowered == "false";
  if (it == known.end()) {
    // A TLS setting that is off asks for nothing this epochd lacks.
    if (flag != key && is_off) return Status::Ok();
    return Status::InvalidArgument(fmt::format(
        "{}: key '{}' is not an etcd or epochd setting this epochd supports", origin, key));
  }
  const bool accepted =
      it->accepted.empty() || std::any_of(it->accepted.begin(), it->accepted.end(),
                                          [&](std::string_view v) { return v == lowered; });
  if (!accepted) {
    return Status::InvalidArgument(
        fmt::format("{}: key '{}' = '{}' is not supported: {}", origin, key, *text, it->note));
  }
  if (it->warn && !value.IsNull()) {
    warnings->push_back(fmt::format("{}: key '{}' ignored: {}", origin, key, it->note));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> FlagsFromEtcdYaml(const CLI::App& app, const std::string& text,
                                                   const std::string& origin,
                                                   std::vector<std::string>* warnings) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not valid YAML: {}", origin, e.what()));
  }
  std::vector<std::string> args;
  if (root.IsNull()) return args;
  if (!root.IsMap()) {
    return Status::InvalidArgument(fmt::format("{}: expected a map of settings", origin));
  }
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const YAML::Node& value = entry.second;
    if (key == kConfigFileFlag) {
      return Status::InvalidArgument(fmt::format("{}: key '{}' cannot be nested", origin, key));
    }
    if (key == "debug") {
      Result<std::string> on = ValueText(value, key, origin);
      if (!on.ok()) return on.status();
      if (ToLower(*on) == "true") args.push_back("--log-level=debug");
      continue;
    }
    if (key == "client-transport-security" || key == "peer-transport-security") {
      if (value.IsNull()) continue;
      if (!value.IsMap()) {
        return Status::InvalidArgument(fmt::format("{}: key '{}' must be a map", origin, key));
      }
      for (const auto& tls : value) {
        const std::string tls_key = tls.first.as<std::string>();
        EPOCH_RETURN_IF_ERROR(AddKey(app, key + "." + tls_key, TransportSecurityFlag(key, tls_key),
                                     tls.second, origin, &args, warnings));
      }
      continue;
    }
    EPOCH_RETURN_IF_ERROR(AddKey(app, key, key, value, origin, &args, warnings));
  }
  return args;
}

namespace {

// The value of `--name` if `args` gives it (`--name value` or `--name=value`).
std::optional<std::string> FlagValue(const std::vector<std::string>& args, std::string_view name) {
  const std::string flag = fmt::format("--{}", name);
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return std::nullopt;
}

bool GivenOnCommandLine(const std::vector<std::string>& args, const std::string& name) {
  const std::string flag = "--" + name;
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == flag || a.rfind(flag + "=", 0) == 0;
  });
}

bool IsHelpOrVersion(const std::string& arg) {
  return arg == "-h" || arg == "--help" || arg == "--version";
}

Result<ResolvedArgs> FromConfigFile(const CLI::App& app, const std::vector<std::string>& args,
                                    const Environment& env, const std::string& path) {
  ResolvedArgs out;
  std::ifstream in(path);
  if (!in) {
    return Status::InvalidArgument(fmt::format("--config-file {}: cannot be read", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  Result<std::vector<std::string>> flags = FlagsFromEtcdYaml(app, text.str(), path, &out.warnings);
  if (!flags.ok()) return flags.status();
  out.args = std::move(*flags);
  for (const std::string& a : args) {
    if (IsHelpOrVersion(a)) out.args.push_back(a);
  }
  for (const std::string& name : FlagNames(app)) {
    if (name != kConfigFileFlag && GivenOnCommandLine(args, name)) {
      out.warnings.push_back(fmt::format("--{} ignored: --config-file is given", name));
    }
  }
  for (const auto& [var, value] : env) {
    for (std::string_view prefix : kEnvPrefixes) {
      if (var.rfind(prefix, 0) == 0 && var != fmt::format("{}CONFIG_FILE", prefix)) {
        out.warnings.push_back(
            fmt::format("environment variable {} ignored: --config-file is given", var));
      }
    }
  }
  out.args.push_back(fmt::format("--{}={}", kConfigFileFlag, path));
  return out;
}

// Settings from EPOCH_* / ETCD_* variables for every flag the command line does not give.
void AddEnvironment(const CLI::App& app, const std::vector<std::string>& args,
                    const Environment& env, ResolvedArgs* out) {
  std::vector<std::string> known_vars;
  for (const std::string& name : FlagNames(app)) {
    bool taken = GivenOnCommandLine(args, name);
    for (std::string_view prefix : kEnvPrefixes) {
      const std::string var = fmt::format("{}{}", prefix, EnvSuffix(name));
      known_vars.push_back(var);
      auto it = env.find(var);
      if (it == env.end()) continue;
      if (taken) {
        out->warnings.push_back(
            fmt::format("environment variable {} ignored: --{} is set already", var, name));
        continue;
      }
      out->args.push_back(fmt::format("--{}={}", name, it->second));
      taken = true;
    }
  }
  for (const auto& [var, value] : env) {
    const bool ours = std::any_of(kEnvPrefixes.begin(), kEnvPrefixes.end(),
                                  [&](std::string_view p) { return var.rfind(p, 0) == 0; });
    if (ours && std::find(known_vars.begin(), known_vars.end(), var) == known_vars.end()) {
      out->warnings.push_back(fmt::format("unrecognized environment variable {} ignored", var));
    }
  }
}

}  // namespace

Result<ResolvedArgs> ResolveArgs(const CLI::App& app, const std::vector<std::string>& args,
                                 const Environment& env) {
  std::optional<std::string> config = FlagValue(args, kConfigFileFlag);
  for (std::string_view prefix : kEnvPrefixes) {
    if (config) break;
    auto it = env.find(fmt::format("{}CONFIG_FILE", prefix));
    if (it != env.end() && !it->second.empty()) config = it->second;
  }
  if (config) return FromConfigFile(app, args, env, *config);
  ResolvedArgs out;
  out.args = args;
  AddEnvironment(app, args, env, &out);
  return out;
}

Environment EnvironmentFrom(char** environ_list) {
  Environment env;
  for (char** e = environ_list; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

}  // namespace epoch::server
