#include "kv_state_machine.h"

#include <cstring>
#include <functional>

namespace epoch::sim {
namespace {

using lincheck::KvInput;
using lincheck::KvOpKind;
using lincheck::KvOutput;
using lincheck::KvState;

constexpr char kMagic = 'K';

void PutU64(std::string& out, std::uint64_t v) {
  char buf[8];
  std::memcpy(buf, &v, sizeof v);
  out.append(buf, sizeof buf);
}

void PutString(std::string& out, std::string_view s) {
  PutU64(out, s.size());
  out.append(s);
}

bool GetU64(std::string_view& in, std::uint64_t* v) {
  if (in.size() < 8) return false;
  std::memcpy(v, in.data(), 8);
  in.remove_prefix(8);
  return true;
}

bool GetString(std::string_view& in, std::string* s) {
  std::uint64_t n = 0;
  if (!GetU64(in, &n) || in.size() < n) return false;
  s->assign(in.substr(0, n));
  in.remove_prefix(n);
  return true;
}

}  // namespace

std::string EncodeCommand(const KvCommand& command) {
  std::string out(1, kMagic);
  out.push_back(static_cast<char>(command.input.kind));
  out.push_back(command.input.expected.has_value() ? 1 : 0);
  PutU64(out, command.request_id);
  PutString(out, command.input.key);
  PutString(out, command.input.value);
  PutString(out, command.input.expected.value_or(""));
  return out;
}

std::optional<KvCommand> DecodeCommand(std::string_view data) {
  if (data.size() < 3 || data[0] != kMagic) return std::nullopt;
  KvCommand c;
  c.input.kind = static_cast<KvOpKind>(data[1]);
  bool has_expected = data[2] != 0;
  data.remove_prefix(3);
  std::string expected;
  if (!GetU64(data, &c.request_id) || !GetString(data, &c.input.key) ||
      !GetString(data, &c.input.value) || !GetString(data, &expected) || !data.empty()) {
    return std::nullopt;
  }
  if (has_expected) c.input.expected = std::move(expected);
  return c;
}

KvOutput KvStateMachine::Apply(const KvInput& input) {
  auto it = data_.find(input.key);
  const bool exists = it != data_.end();
  auto write = [&] {
    std::int64_t version = exists ? it->second.version + 1 : 1;
    data_[input.key] = KvState{true, input.value, version};
  };
  switch (input.kind) {
    case KvOpKind::kPut: write(); return KvOutput::None();
    case KvOpKind::kCas: {
      bool match =
          input.expected.has_value() ? (exists && it->second.value == *input.expected) : !exists;
      if (match) write();
      return KvOutput::Ok(match);
    }
    case KvOpKind::kDelete:
      if (exists) data_.erase(it);
      return KvOutput::Ok(exists);
    case KvOpKind::kGet: return Get(input.key);
  }
  return KvOutput::None();
}

KvOutput KvStateMachine::Get(const std::string& key) const {
  auto it = data_.find(key);
  if (it == data_.end()) return KvOutput::Absent();
  return KvOutput::Value(it->second.value, it->second.version);
}

std::uint64_t KvStateMachine::Digest() const {
  std::uint64_t h = 0;
  for (const auto& [key, state] : data_) {
    std::uint64_t x = std::hash<std::string>{}(key)*31 + std::hash<std::string>{}(state.value);
    h += x ^ static_cast<std::uint64_t>(state.version) * 0x9e3779b97f4a7c15ULL;
  }
  return h;
}

}  // namespace epoch::sim
