// KvModel: the sequential specification of a versioned key-value register, partitioned per key,
// for lincheck::Check (checker.h).
//
// Operations: put(k, v); get(k) -> absent | (value, version); cas(k, expected, new) -> ok/failed,
// where `expected` is a value or "absent" (create-if-absent); delete(k) -> deleted or not.
// The version follows etcd's per-key `version`: a key created by a write has version 1, every
// later write adds 1, a delete removes the key (version 0). Values should be unique per write
// (the checker is then fast: each read maps to one write), but the model does not require it.
//
// Who uses it: tests/sim (its state machine implements exactly these semantics) and the chaos
// suite (mapping etcd Range/Put/Txn/DeleteRange onto these operations).
//
// Operations that never returned (timeouts): a get has no effect and is always legal; a put,
// cas or delete may take effect at its linearization point (a cas with the outcome the state
// dictates) or never (the checker may place it after everything else).
//
// Threading: stateless; share freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "epoch/lincheck/history.h"

namespace epoch::lincheck {

enum class KvOpKind : std::uint8_t { kPut, kGet, kCas, kDelete };

struct KvInput {
  KvOpKind kind = KvOpKind::kGet;
  std::string key;
  std::string value;                    // put, cas: the value written
  std::optional<std::string> expected;  // cas: required current value; nullopt = key absent

  static KvInput Put(std::string k, std::string v) {
    return {KvOpKind::kPut, std::move(k), std::move(v), std::nullopt};
  }
  static KvInput Get(std::string k) { return {KvOpKind::kGet, std::move(k), {}, std::nullopt}; }
  static KvInput Cas(std::string k, std::optional<std::string> expected, std::string v) {
    return {KvOpKind::kCas, std::move(k), std::move(v), std::move(expected)};
  }
  static KvInput Delete(std::string k) {
    return {KvOpKind::kDelete, std::move(k), {}, std::nullopt};
  }
};

inline constexpr std::int64_t kVersionNotReported = -1;

struct KvOutput {
  // get: whether the key exists, its value and version (kVersionNotReported = do not check).
  bool found = false;
  std::string value;
  std::int64_t version = kVersionNotReported;
  // cas: whether the compare succeeded. delete: whether a key was deleted (nullopt = not
  // reported, do not check). put: unused.
  std::optional<bool> ok;

  static KvOutput Absent() { return {}; }
  static KvOutput Value(std::string v, std::int64_t version = kVersionNotReported) {
    return {true, std::move(v), version, std::nullopt};
  }
  static KvOutput Ok(bool ok) { return {false, {}, kVersionNotReported, ok}; }
  static KvOutput None() { return {}; }
};

struct KvState {
  bool exists = false;
  std::string value;
  std::int64_t version = 0;  // 0 iff !exists

  friend bool operator==(const KvState&, const KvState&) = default;
};

class KvModel {
 public:
  using Input = KvInput;
  using Output = KvOutput;
  using State = KvState;
  using Op = Operation<Input, Output>;

  [[nodiscard]] State Init() const { return {}; }
  [[nodiscard]] std::optional<State> Step(const State& s, const Input& in, const Output& out,
                                          bool never_returned) const;
  [[nodiscard]] std::uint64_t HashState(const State& s) const;
  [[nodiscard]] std::string PartitionKey(const Input& in) const { return in.key; }
  [[nodiscard]] std::string DescribeOperation(const Input& in, const Output& out,
                                              bool never_returned) const;
  [[nodiscard]] std::string DescribeState(const State& s) const;
};

}  // namespace epoch::lincheck
