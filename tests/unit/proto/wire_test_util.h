// Helpers for the proto wire tests: hex dumps of serialized messages, so each expected string can
// be read field by field as (tag byte = field_number << 3 | wire_type, length/value bytes).
#pragma once

#include <string>

namespace epoch::prototest {

inline std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

// Serializes deterministically (field-number order; map order fixed) and hex-encodes.
template <typename Message>
std::string WireHex(const Message& m) {
  std::string out;
  m.SerializeToString(&out);
  return Hex(out);
}

}  // namespace epoch::prototest
