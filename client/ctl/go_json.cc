// Go-style JSON of protobuf messages (see go_json.h).
#include "go_json.h"

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>

namespace epoch::ctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// protoc-gen-gogo's CamelCase: "response_put" -> "ResponsePut", "target_union" -> "TargetUnion".
std::string GoName(std::string_view proto_name) {
  std::string out;
  bool upper = true;
  for (char c : proto_name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper && c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
    upper = false;
  }
  return out;
}

void AppendScalar(const Message& m, const Reflection& r, const FieldDescriptor& f, int index,
                  std::string* out) {
  const bool rep = index >= 0;
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      *out += std::to_string(rep ? r.GetRepeatedInt32(m, &f, index) : r.GetInt32(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      *out += std::to_string(rep ? r.GetRepeatedInt64(m, &f, index) : r.GetInt64(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      *out += std::to_string(rep ? r.GetRepeatedUInt32(m, &f, index) : r.GetUInt32(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      *out += std::to_string(rep ? r.GetRepeatedUInt64(m, &f, index) : r.GetUInt64(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      *out += fmt::format("{}", rep ? r.GetRepeatedDouble(m, &f, index) : r.GetDouble(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      *out += fmt::format("{}", rep ? r.GetRepeatedFloat(m, &f, index) : r.GetFloat(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      *out += (rep ? r.GetRepeatedBool(m, &f, index) : r.GetBool(m, &f)) ? "true" : "false";
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      *out += std::to_string(rep ? r.GetRepeatedEnumValue(m, &f, index) : r.GetEnumValue(m, &f));
      break;
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string scratch;
      const std::string& s = rep ? r.GetRepeatedStringReference(m, &f, index, &scratch)
                                 : r.GetStringReference(m, &f, &scratch);
      *out += f.type() == FieldDescriptor::TYPE_BYTES ? GoJsonBytes(s) : GoJsonString(s);
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      *out += GoJson(rep ? r.GetRepeatedMessage(m, &f, index) : r.GetMessage(m, &f));
      break;
  }
}

void AppendValue(const Message& m, const Reflection& r, const FieldDescriptor& f,
                 std::string* out) {
  if (!f.is_repeated()) {
    AppendScalar(m, r, f, -1, out);
    return;
  }
  *out += '[';
  for (int i = 0; i < r.FieldSize(m, &f); ++i) {
    if (i > 0) *out += ',';
    AppendScalar(m, r, f, i, out);
  }
  *out += ']';
}

// The fields of `m`, comma separated, without braces.
std::string Fields(const Message& m) {
  const google::protobuf::Descriptor& d = *m.GetDescriptor();
  const Reflection& r = *m.GetReflection();
  std::string out;
  const auto key = [&out](std::string_view name) {
    if (!out.empty()) out += ',';
    out += GoJsonString(name) + ':';
  };
  for (int i = 0; i < d.field_count(); ++i) {
    const FieldDescriptor& f = *d.field(i);
    if (const auto* oneof = f.real_containing_oneof()) {
      // The oneof sits where its first member is declared; only the member that is set shows.
      if (oneof->field(0) != &f) continue;
      const FieldDescriptor* set = r.GetOneofFieldDescriptor(m, oneof);
      if (set == nullptr) continue;
      key(GoName(oneof->name()));
      out += '{' + GoJsonString(GoName(set->name())) + ':';
      AppendValue(m, r, *set, &out);
      out += '}';
      continue;
    }
    if (f.is_repeated() ? r.FieldSize(m, &f) == 0 : !r.HasField(m, &f)) continue;  // omitempty
    key(f.name());
    AppendValue(m, r, f, &out);
  }
  return out;
}

}  // namespace

std::string GoJson(const Message& message) { return "{" + Fields(message) + "}"; }

std::size_t Utf8Rune(std::string_view text, std::size_t i, std::uint32_t* rune) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    *rune = lead;
    return 1;
  }
  const std::size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (n == 0 || lead > 0xf4 || i + n > text.size()) return 0;
  std::uint32_t value = lead & (0x3f >> (n - 1));
  for (std::size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3f);
  }
  const std::uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
  if (value < min[n] || value > 0x10ffff || (value >= 0xd800 && value <= 0xdfff)) return 0;
  *rune = value;
  return n;
}

std::string GoJsonString(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    std::uint32_t rune = 0;
    const std::size_t n = Utf8Rune(text, i, &rune);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
    } else if (rune == 0x2028 || rune == 0x2029) {
      out += rune == 0x2028 ? "\\u2028" : "\\u2029";
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out + "\"";
}

std::string GoJsonBytes(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = "\"";
  std::size_t i = 0;
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(bytes[k]); };
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v = (at(i) << 16) | (at(i + 1) << 8) | at(i + 2);
    for (int shift = 18; shift >= 0; shift -= 6) out += kAlphabet[(v >> shift) & 0x3f];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    const std::uint32_t v = (at(i) << 16) | (rest == 2 ? at(i + 1) << 8 : 0);
    out += kAlphabet[(v >> 18) & 0x3f];
    out += kAlphabet[(v >> 12) & 0x3f];
    out += rest == 2 ? kAlphabet[(v >> 6) & 0x3f] : '=';
    out += '=';
  }
  return out + "\"";
}

namespace {

// `value` / 10^digits with the fraction's trailing zeros (and a bare point) removed.
std::string Fixed(std::uint64_t value, int digits) {
  std::uint64_t scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  std::string fraction = fmt::format("{:0{}}", value % scale, digits);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  return std::to_string(value / scale) + (fraction.empty() ? "" : "." + fraction);
}

}  // namespace

std::string GoDuration(std::chrono::nanoseconds d) {
  const bool negative = d.count() < 0;
  const auto ns = static_cast<std::uint64_t>(negative ? -d.count() : d.count());
  std::string text;
  if (ns == 0) {
    text = "0s";
  } else if (ns < 1'000) {
    text = std::to_string(ns) + "ns";
  } else if (ns < 1'000'000) {
    text = Fixed(ns, 3) + "\u00b5s";
  } else if (ns < 1'000'000'000) {
    text = Fixed(ns, 6) + "ms";
  } else {
    const std::uint64_t seconds = ns / 1'000'000'000;
    const std::string s = Fixed(ns % 60'000'000'000, 9) + "s";
    const std::uint64_t minutes = seconds / 60 % 60;
    const std::uint64_t hours = seconds / 3600;
    if (hours > 0) {
      text = fmt::format("{}h{}m{}", hours, minutes, s);
    } else if (minutes > 0) {
      text = fmt::format("{}m{}", minutes, s);
    } else {
      text = s;
    }
  }
  return negative ? "-" + text : text;
}

void GoJsonObject::Key(std::string_view name) {
  if (!body_.empty()) body_ += ',';
  body_ += GoJsonString(name) + ':';
}

GoJsonObject& GoJsonObject::Embed(const Message* message) {
  if (message == nullptr) return *this;
  const std::string fields = Fields(*message);
  if (fields.empty()) return *this;
  if (!body_.empty()) body_ += ',';
  body_ += fields;
  return *this;
}

GoJsonObject& GoJsonObject::Raw(std::string_view name, std::string_view json) {
  Key(name);
  body_ += json;
  return *this;
}

GoJsonObject& GoJsonObject::Int(std::string_view name, std::int64_t value) {
  return Raw(name, std::to_string(value));
}

GoJsonObject& GoJsonObject::Bool(std::string_view name, bool value) {
  return Raw(name, value ? "true" : "false");
}

GoJsonObject& GoJsonObject::String(std::string_view name, std::string_view value) {
  return Raw(name, GoJsonString(value));
}

}  // namespace epoch::ctl
