#include "json_log_formatter.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <chrono>
#include <ctime>
#include <optional>
#include <vector>

namespace epoch::server {
namespace {

struct Field {
  std::string_view key;
  std::string value;  // unescaped
  bool quoted = false;
};

bool KeyStart(char c) { return c >= 'a' && c <= 'z'; }
bool KeyChar(char c) {
  return KeyStart(c) || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

bool Reserved(std::string_view key) {
  return key == "level" || key == "ts" || key == "caller" || key == "msg";
}

// Length of the UTF-8 sequence starting at s[i], or 0 when it is not valid UTF-8.
std::size_t Utf8Length(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  if (c >= 0xE0 && c <= 0xEF) n = 3;
  if (c >= 0xF0 && c <= 0xF4) n = 4;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  return n;
}

void AppendJsonString(std::string_view s, std::string& out) {
  out += '"';
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    switch (c) {
      case '"':
        out += "\\\"";
        ++i;
        continue;
      case '\\':
        out += "\\\\";
        ++i;
        continue;
      case '\n':
        out += "\\n";
        ++i;
        continue;
      case '\r':
        out += "\\r";
        ++i;
        continue;
      case '\t':
        out += "\\t";
        ++i;
        continue;
      default: break;
    }
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
      ++i;
      continue;
    }
    const std::size_t n = Utf8Length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  out += '"';
}

bool DecimalInteger(std::string_view v) {
  std::string_view digits = v.substr(!v.empty() && v[0] == '-' ? 1 : 0);
  if (digits.empty() || digits.size() > 18) return false;  // fits an int64 and a double's 2^53
  if (digits.size() > 1 && digits[0] == '0') return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A quoted value starting at text[at] (the opening quote): its unescaped text and the index past
// the closing quote, or nullopt when it does not close.
std::optional<std::pair<std::string, std::size_t>> QuotedValue(std::string_view text,
                                                               std::size_t at) {
  std::string value;
  for (std::size_t i = at + 1; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      const char escaped = text[++i];
      value += escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped == 'r' ? '\r' : escaped;
    } else if (text[i] == '"') {
      return std::make_pair(std::move(value), i + 1);
    } else {
      value += text[i];
    }
  }
  return std::nullopt;
}

// Splits `text` into the words of "msg" and the key=value fields.
void Split(std::string_view text, std::string& words, std::vector<Field>& fields) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == ' ') {
      ++i;
      continue;
    }
    std::size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    std::size_t eq = i;
    while (eq < end && KeyChar(text[eq])) ++eq;
    const std::string_view key = text.substr(i, eq - i);
    bool taken = false;
    if (KeyStart(text[i]) && eq < end && text[eq] == '=' && !Reserved(key)) {
      bool repeated = false;
      for (const Field& f : fields) repeated = repeated || f.key == key;
      if (!repeated && eq + 1 < text.size() && text[eq + 1] == '"') {
        if (auto quoted = QuotedValue(text, eq + 1)) {
          fields.push_back({key, std::move(quoted->first), true});
          end = quoted->second;
          taken = true;
        }
      } else if (!repeated && eq + 1 < end) {
        std::string_view value = text.substr(eq + 1, end - eq - 1);
        if (value.size() > 1 && (value.back() == ',' || value.back() == ';')) {
          value.remove_suffix(1);
        }
        fields.push_back({key, std::string(value), false});
        taken = true;
      }
    }
    if (!taken) {
      if (!words.empty()) words += ' ';
      words.append(text.substr(i, end - i));
    }
    i = end;
  }
}

std::string_view LevelName(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace:
    case spdlog::level::debug: return "debug";
    case spdlog::level::info: return "info";
    case spdlog::level::warn: return "warn";
    case spdlog::level::err: return "error";
    case spdlog::level::critical: return "fatal";
    default: return "info";
  }
}

std::string Timestamp(spdlog::log_clock::time_point time) {
  using std::chrono::duration_cast;
  const auto since_epoch = duration_cast<std::chrono::microseconds>(time.time_since_epoch());
  const std::time_t seconds = static_cast<std::time_t>(since_epoch.count() / 1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                     since_epoch.count() % 1'000'000);
}

// zap's short caller, "package/file.cc:line": the file's directory, or the module above a src/
// directory ("replication/raft_driver.cc" for server/replication/src/raft_driver.cc).
std::string Caller(const spdlog::source_loc& source) {
  std::string_view path = source.filename;
  std::string_view file = path;
  std::string_view dir;
  if (std::size_t slash = path.rfind('/'); slash != std::string_view::npos) {
    file = path.substr(slash + 1);
    path = path.substr(0, slash);
    if (path.ends_with("/src")) path.remove_suffix(4);
    dir = path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  }
  if (dir.empty()) return fmt::format("{}:{}", file, source.line);
  return fmt::format("{}/{}:{}", dir, file, source.line);
}

}  // namespace

bool IdKey(std::string_view key) {
  static constexpr std::array<std::string_view, 9> kIdKeys = {
      "node", "peer",   "leader",  "previous-leader", "from",
      "to",   "member", "cluster", "alarm-member"};
  for (std::string_view id : kIdKeys) {
    if (key == id) return true;
  }
  return key.size() > 3 && key.substr(key.size() - 3) == "-id";
}

std::string JsonLogLine(const spdlog::details::log_msg& msg) {
  std::string words;
  std::vector<Field> fields;
  Split(std::string_view(msg.payload.data(), msg.payload.size()), words, fields);
  std::string out = R"({"level":")";
  out += LevelName(msg.level);
  out += R"(","ts":")";
  out += Timestamp(msg.time);
  out += '"';
  if (!msg.source.empty()) {
    out += R"(,"caller":)";
    AppendJsonString(Caller(msg.source), out);
  }
  out += R"(,"msg":)";
  AppendJsonString(words, out);
  for (const Field& f : fields) {
    out += ',';
    AppendJsonString(f.key, out);
    out += ':';
    if (!f.quoted && !IdKey(f.key) && DecimalInteger(f.value)) {
      out += f.value;
    } else {
      AppendJsonString(f.value, out);
    }
  }
  out += '}';
  return out;
}

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  std::string line = JsonLogLine(msg);
  line += '\n';
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

}  // namespace epoch::server
