// Test helper: builds revision-checker histories (revision_history.h) in a compact way.
// `ret == kNeverReturned` (or the Unknown* calls) records an unknown outcome.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "epoch/lincheck/revision_checker.h"

namespace epoch::lincheck::testing {

inline RevKeyValue Kv(std::string key, std::string value, std::int64_t create, std::int64_t mod,
                      std::int64_t version) {
  return RevKeyValue{std::move(key), std::move(value), create, mod, version};
}

class RevHistoryBuilder {
 public:
  RevHistoryBuilder& Put(std::int64_t call, std::int64_t ret, std::string k, std::string v,
                         std::int64_t rev, std::uint64_t client = 0) {
    return Add(call, ret, RevInput::Put(std::move(k), std::move(v)), Header(rev), client);
  }
  RevHistoryBuilder& UnknownPut(std::int64_t call, std::string k, std::string v,
                                std::uint64_t client = 0) {
    return Put(call, kNeverReturned, std::move(k), std::move(v), 0, client);
  }
  RevHistoryBuilder& Get(std::int64_t call, std::int64_t ret, std::string k, std::int64_t rev,
                         std::vector<RevKeyValue> kvs, std::uint64_t client = 0) {
    return Range(call, ret, std::move(k), {}, rev, std::move(kvs), client);
  }
  RevHistoryBuilder& Range(std::int64_t call, std::int64_t ret, std::string k, std::string end,
                           std::int64_t rev, std::vector<RevKeyValue> kvs, std::uint64_t client = 0,
                           bool serializable = false) {
    RevOutput out = Header(rev);
    out.kvs = std::move(kvs);
    return Add(call, ret, RevInput::Range(std::move(k), std::move(end), serializable), out, client);
  }
  RevHistoryBuilder& Delete(std::int64_t call, std::int64_t ret, std::string k, std::string end,
                            std::int64_t rev, std::int64_t deleted, std::uint64_t client = 0) {
    RevOutput out = Header(rev);
    out.deleted = deleted;
    return Add(call, ret, RevInput::DeleteRange(std::move(k), std::move(end)), out, client);
  }
  RevHistoryBuilder& Txn(std::int64_t call, std::int64_t ret, std::vector<RevCompare> compares,
                         std::vector<RevMutation> success, std::vector<RevMutation> failure,
                         std::int64_t rev, bool succeeded, std::uint64_t client = 0) {
    RevOutput out = Header(rev);
    out.succeeded = succeeded;
    return Add(call, ret,
               RevInput::Txn(std::move(compares), std::move(success), std::move(failure)), out,
               client);
  }
  RevHistoryBuilder& Add(std::int64_t call, std::int64_t ret, RevInput in, RevOutput out,
                         std::uint64_t client) {
    ops_.push_back(RevOp{client, call, ret, std::move(in), std::move(out)});
    return *this;
  }
  [[nodiscard]] const std::vector<RevOp>& ops() const { return ops_; }
  [[nodiscard]] std::vector<RevOp>& mutable_ops() { return ops_; }

 private:
  static RevOutput Header(std::int64_t rev) {
    RevOutput out;
    out.header_revision = rev;
    return out;
  }
  std::vector<RevOp> ops_;
};

// The rules a check reported, for "breaks exactly this rule" assertions.
inline std::set<std::string> Rules(const RevisionCheckResult& r) {
  std::set<std::string> out;
  for (const RevisionViolation& v : r.violations) out.insert(v.rule);
  return out;
}

}  // namespace epoch::lincheck::testing
