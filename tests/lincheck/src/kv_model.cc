#include "epoch/lincheck/kv_model.h"

#include <fmt/format.h>

#include <functional>

#include "epoch/lincheck/checker.h"

namespace epoch::lincheck {

namespace {

KvState Written(const KvState& s, const std::string& value) {
  return KvState{true, value, s.exists ? s.version + 1 : 1};
}

bool CasMatches(const KvState& s, const KvInput& in) {
  if (!in.expected.has_value()) return !s.exists;
  return s.exists && s.value == *in.expected;
}

std::string Quoted(const std::optional<std::string>& v) {
  return v.has_value() ? fmt::format("\"{}\"", *v) : std::string("<absent>");
}

}  // namespace

std::optional<KvState> KvModel::Step(const KvState& s, const KvInput& in, const KvOutput& out,
                                     bool never_returned) const {
  switch (in.kind) {
    case KvOpKind::kGet: {
      if (never_returned) return s;  // a read with no answer has no effect
      if (out.found != s.exists) return std::nullopt;
      if (out.found && out.value != s.value) return std::nullopt;
      if (out.version != kVersionNotReported && out.version != s.version) return std::nullopt;
      return s;
    }
    case KvOpKind::kPut: return Written(s, in.value);
    case KvOpKind::kCas: {
      bool matches = CasMatches(s, in);
      if (!never_returned) {
        if (!out.ok.has_value() || *out.ok != matches) return std::nullopt;
      }
      return matches ? Written(s, in.value) : s;
    }
    case KvOpKind::kDelete: {
      if (!never_returned && out.ok.has_value() && *out.ok != s.exists) return std::nullopt;
      return KvState{};
    }
  }
  return std::nullopt;
}

std::uint64_t KvModel::HashState(const KvState& s) const {
  std::uint64_t h = std::hash<std::string>{}(s.value);
  return detail::Bitset::Mix(h ^ (static_cast<std::uint64_t>(s.version) << 1) ^ (s.exists ? 1 : 0));
}

std::string KvModel::DescribeOperation(const KvInput& in, const KvOutput& out,
                                       bool never_returned) const {
  std::string call;
  switch (in.kind) {
    case KvOpKind::kPut: call = fmt::format("put({}, \"{}\")", in.key, in.value); break;
    case KvOpKind::kGet: call = fmt::format("get({})", in.key); break;
    case KvOpKind::kCas:
      call = fmt::format("cas({}, {}, \"{}\")", in.key, Quoted(in.expected), in.value);
      break;
    case KvOpKind::kDelete: call = fmt::format("delete({})", in.key); break;
  }
  if (never_returned) return call + " -> <unknown: never returned>";
  switch (in.kind) {
    case KvOpKind::kGet:
      if (!out.found) return call + " -> <absent>";
      if (out.version == kVersionNotReported) return fmt::format("{} -> \"{}\"", call, out.value);
      return fmt::format("{} -> \"{}\" (version {})", call, out.value, out.version);
    case KvOpKind::kPut: return call + " -> ok";
    case KvOpKind::kCas:
      if (!out.ok.has_value()) return call + " -> <no outcome reported>";
      return call + (*out.ok ? " -> ok" : " -> failed");
    case KvOpKind::kDelete:
      if (!out.ok.has_value()) return call + " -> ok";
      return call + (*out.ok ? " -> ok" : " -> failed");
  }
  return call;
}

std::string KvModel::DescribeState(const KvState& s) const {
  if (!s.exists) return "<absent>";
  return fmt::format("\"{}\" (version {})", s.value, s.version);
}

}  // namespace epoch::lincheck
