// The lines of `watch -i` (see watch_parse.h).
#include "watch_parse.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <optional>
#include <regex>

#include "fields_output.h"
#include "txn_parse.h"

namespace epoch::ctl {
namespace {

// Go's strconv.ParseBool.
std::optional<bool> ParseGoBool(const std::string& text) {
  for (const char* yes : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (text == yes) return true;
  }
  for (const char* no : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (text == no) return false;
  }
  return std::nullopt;
}

// Go's strconv.ParseInt(text, 0, 64) for decimal and 0x numbers; the error as Go words it.
Result<std::int64_t> ParseGoInt(const std::string& text) {
  const auto fail = [&text](const char* why) {
    return Status::InvalidArgument(
        fmt::format("strconv.ParseInt: parsing {}: {}", GoQuote(text), why));
  };
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '+' || digits[0] == '-')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    base = 16;
    digits.remove_prefix(2);
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value, base);
  if (digits.empty() || end != digits.data() + digits.size()) {
    return ec == std::errc::result_out_of_range ? fail("value out of range")
                                                : fail("invalid syntax");
  }
  const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  if (ec == std::errc::result_out_of_range || value > limit) return fail("value out of range");
  return negative ? static_cast<std::int64_t>(0 - value) : static_cast<std::int64_t>(value);
}

struct ParsedFlags {
  bool prefix = false;
  bool prev_kv = false;
  std::int64_t rev = 0;
  std::vector<std::string> args;  // the arguments that are not flags, in order
};

// A bool flag's value; the error as pflag words it.
Status SetBool(const std::string& flag_name, const std::string& value, bool* out) {
  const std::optional<bool> parsed = ParseGoBool(value);
  if (!parsed) {
    return Status::InvalidArgument(
        fmt::format("invalid argument {} for {} flag: strconv.ParseBool: parsing {}: invalid "
                    "syntax",
                    GoQuote(value), GoQuote(flag_name), GoQuote(value)));
  }
  *out = *parsed;
  return Status::Ok();
}

// pflag's parse of the watch command's flags (--prefix, --rev, --prev-kv, -i/--interactive;
// -h/--help is not among them, so pflag answers ErrHelp).
Result<ParsedFlags> ParseFlags(const std::vector<std::string>& words) {
  ParsedFlags f;
  bool interactive = false;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word == "--") {
      f.args.insert(f.args.end(), words.begin() + static_cast<std::ptrdiff_t>(i) + 1, words.end());
      break;
    }
    if (word.size() < 2 || word[0] != '-') {
      f.args.push_back(word);
      continue;
    }
    if (word[1] == '-') {
      const std::size_t eq = word.find('=');
      const std::string name = word.substr(2, eq == std::string::npos ? eq : eq - 2);
      const std::optional<std::string> value =
          eq == std::string::npos ? std::nullopt : std::optional(word.substr(eq + 1));
      if (name.empty() || name[0] == '-' || name[0] == '=') {
        return Status::InvalidArgument(fmt::format("bad flag syntax: {}", word));
      }
      if (name == "help") return Status::InvalidArgument("pflag: help requested");
      if (name == "prefix" || name == "prev-kv" || name == "interactive") {
        bool* target = name == "prefix" ? &f.prefix : name == "prev-kv" ? &f.prev_kv : &interactive;
        const std::string flag_name = name == "interactive" ? "-i, --interactive" : "--" + name;
        EPOCH_RETURN_IF_ERROR(SetBool(flag_name, value.value_or("true"), target));
        continue;
      }
      if (name != "rev") return Status::InvalidArgument(fmt::format("unknown flag: --{}", name));
      std::string rev;
      if (value) {
        rev = *value;
      } else if (i + 1 < words.size()) {
        rev = words[++i];
      } else {
        return Status::InvalidArgument("flag needs an argument: --rev");
      }
      Result<std::int64_t> parsed = ParseGoInt(rev);
      if (!parsed.ok()) {
        return Status::InvalidArgument(fmt::format("invalid argument {} for \"--rev\" flag: {}",
                                                   GoQuote(rev), parsed.status().message()));
      }
      f.rev = *parsed;
      continue;
    }
    // Shorthands: only -i (a bool, "-i=false" sets it).
    const std::string shorthands = word.substr(1);
    for (std::size_t c = 0; c < shorthands.size(); ++c) {
      if (shorthands[c] == 'h') return Status::InvalidArgument("pflag: help requested");
      if (shorthands[c] != 'i') {
        return Status::InvalidArgument(
            fmt::format("unknown shorthand flag: '{}' in -{}", shorthands[c], shorthands));
      }
      if (c + 1 < shorthands.size() && shorthands[c + 1] == '=') {
        EPOCH_RETURN_IF_ERROR(SetBool("-i, --interactive", shorthands.substr(c + 2), &interactive));
        break;
      }
      interactive = true;
    }
  }
  return f;
}

// etcdctl's "Invalid command <line> (<why>)".
WatchLine Invalid(const std::string& line, std::string_view why) {
  WatchLine w;
  w.kind = WatchLine::Kind::kInvalid;
  w.message = fmt::format("Invalid command {} ({})", line, why);
  return w;
}

WatchLine Fatal(std::string_view message) {
  WatchLine line;
  line.kind = WatchLine::Kind::kFatal;
  line.message = std::string(message);
  return line;
}

// etcdctl's texts for the argument errors.
constexpr std::string_view kBadArgumentCount = "bad number of arguments";
constexpr std::string_view kNoCommandAfterSeparator =
    "bad number of arguments (found separator --, but no commands)";
constexpr std::string_view kConflictingEnvKey =
    "bad number of arguments (found conflicting environment key)";
constexpr std::string_view kRangeEndWithPrefix =
    "`range_end` and `--prefix` are mutually exclusive";

// The watch's own arguments: ETCDCTL_WATCH_KEY (and range end) first, then the parsed arguments,
// cut before the last occurrence of the command's first word, which is where etcdctl takes the
// command to start (so `watch a echo -- echo hi` watches [a, echo)).
std::vector<std::string> WatchArguments(const std::vector<std::string>& parsed,
                                        const std::vector<std::string>& command,
                                        const WatchEnv& env) {
  std::vector<std::string> args;
  if (!env.key.empty()) args.push_back(env.key);
  if (!env.key.empty() && !env.range_end.empty()) args.push_back(env.range_end);
  args.insert(args.end(), parsed.begin(), parsed.end());
  if (command.empty()) return args;
  const auto start = std::find(args.rbegin(), args.rend(), command.front());
  args.erase(start == args.rend() ? args.begin() : std::prev(start.base()), args.end());
  return args;
}

}  // namespace

std::vector<std::string> Argify(const std::string& line) {
  // etcdctl's pattern: a double-quoted string, a single-quoted one, or a word.
  static const std::regex kWord(R"re("(?:[^"\\]|\\.)*"|'[^']*'|[^'"\s]\S*[^'"\s]?)re");
  std::vector<std::string> words;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), kWord);
       it != std::sregex_iterator(); ++it) {
    std::string word = it->str();
    if (word.size() >= 2 && word.front() == '\'') {
      word = word.substr(1, word.size() - 2);
    } else if (word.size() >= 2 && word.front() == '"') {
      std::size_t pos = 0;
      Result<std::string> unquoted = ReadQuoted(word, &pos);
      if (unquoted.ok()) word = *unquoted;
    }
    words.push_back(std::move(word));
  }
  return words;
}

Status CheckWatchEnv(const WatchEnv& env) {
  if (env.key.empty() && !env.range_end.empty()) {
    return Status::InvalidArgument(fmt::format(
        "ETCDCTL_WATCH_KEY is empty but got ETCDCTL_WATCH_RANGE_END={}", GoQuote(env.range_end)));
  }
  return Status::Ok();
}

WatchLine ParseWatchLine(const std::string& line, const WatchEnv& env) {
  const std::vector<std::string> words = Argify(line);
  if (words.empty()) {
    WatchLine w;
    w.kind = WatchLine::Kind::kInvalid;
    w.message = fmt::format("Invalid command: {} (watch and progress supported)", line);
    return w;
  }
  if (words[0] == "progress") {
    WatchLine w;
    w.kind = WatchLine::Kind::kProgress;
    return w;
  }
  if (words[0] != "watch") return Invalid(line, "only support watch");
  if (words.size() < 2 && env.key.empty()) {
    return Invalid(line, "command type or key is not provided");
  }
  const std::vector<std::string> rest(words.begin() + 1, words.end());
  // etcdctl's parseWatchArgs: the separator first, then the flags, then the key's presence.
  const auto separator = std::find(rest.begin(), rest.end(), "--");
  const bool has_command = separator != rest.end();
  if (has_command && separator + 1 == rest.end()) return Fatal(kNoCommandAfterSeparator);
  Result<ParsedFlags> flags = ParseFlags(rest);
  if (!flags.ok()) return Fatal(flags.status().message());
  if (!has_command && env.key.empty() && flags->args.empty()) return Fatal(kBadArgumentCount);
  if (!has_command && !env.key.empty() && !flags->args.empty()) return Fatal(kConflictingEnvKey);
  WatchLine watch;
  if (has_command) watch.command.assign(separator + 1, rest.end());
  const std::vector<std::string> args = WatchArguments(flags->args, watch.command, env);
  if (args.empty()) return Invalid(line, kBadArgumentCount);
  if (args.size() == 2 && flags->prefix) return Invalid(line, kRangeEndWithPrefix);
  watch.kind = WatchLine::Kind::kWatch;
  watch.key = args[0];
  if (args.size() == 2) watch.range_end = args[1];
  watch.prefix = flags->prefix;
  watch.prev_kv = flags->prev_kv;
  watch.rev = flags->rev;
  return watch;
}

WatchLine ParseWatchCommandLine(const std::vector<std::string>& after_watch,
                                const std::vector<std::string>& args, bool prefix,
                                const WatchEnv& env) {
  const auto separator = std::find(after_watch.begin(), after_watch.end(), "--");
  const bool has_command = separator != after_watch.end();
  if (has_command && separator + 1 == after_watch.end()) return Fatal(kNoCommandAfterSeparator);
  if (!has_command && after_watch.empty() && env.key.empty()) return Fatal(kBadArgumentCount);
  if (has_command && !env.key.empty()) {
    // The parsed arguments matched from the end against the words as typed: one left over when
    // the typed words reach "--" is a key given besides ETCDCTL_WATCH_KEY.
    const auto separator_at = separator - after_watch.begin();
    auto typed = static_cast<std::ptrdiff_t>(after_watch.size()) - 1;
    for (auto arg = args.rbegin(); arg != args.rend() && typed >= 0; ++arg) {
      if (*arg == after_watch[static_cast<std::size_t>(typed)]) {
        --typed;
      } else if (typed == separator_at) {
        return Fatal(kConflictingEnvKey);
      }
    }
  }
  if (!has_command && !args.empty() && !env.key.empty()) return Fatal(kConflictingEnvKey);
  WatchLine watch;
  if (has_command) watch.command.assign(separator + 1, after_watch.end());
  const std::vector<std::string> watch_args = WatchArguments(args, watch.command, env);
  // etcdctl's getWatchChan; its errors exit too on the command line.
  if (watch_args.empty()) return Fatal(kBadArgumentCount);
  if (watch_args.size() == 2 && prefix) return Fatal(kRangeEndWithPrefix);
  watch.kind = WatchLine::Kind::kWatch;
  watch.key = watch_args[0];
  if (watch_args.size() == 2) watch.range_end = watch_args[1];
  watch.prefix = prefix;
  return watch;
}

}  // namespace epoch::ctl
