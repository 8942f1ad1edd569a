// Test helper: builds KV histories for the lincheck unit tests in a compact way.
#pragma once

#include <vector>

#include "epoch/lincheck/kv_model.h"

namespace epoch::lincheck::testing {

class HistoryBuilder {
 public:
  HistoryBuilder& Put(std::int64_t call, std::int64_t ret, std::string k, std::string v,
                      std::uint64_t client = 0) {
    return Add(call, ret, KvInput::Put(std::move(k), std::move(v)), KvOutput::None(), client);
  }
  HistoryBuilder& Get(std::int64_t call, std::int64_t ret, std::string k, KvOutput out,
                      std::uint64_t client = 0) {
    return Add(call, ret, KvInput::Get(std::move(k)), std::move(out), client);
  }
  HistoryBuilder& Cas(std::int64_t call, std::int64_t ret, std::string k,
                      std::optional<std::string> expected, std::string v, bool ok,
                      std::uint64_t client = 0) {
    return Add(call, ret, KvInput::Cas(std::move(k), std::move(expected), std::move(v)),
               KvOutput::Ok(ok), client);
  }
  HistoryBuilder& Delete(std::int64_t call, std::int64_t ret, std::string k,
                         std::optional<bool> deleted, std::uint64_t client = 0) {
    KvOutput out;
    out.ok = deleted;
    return Add(call, ret, KvInput::Delete(std::move(k)), out, client);
  }
  HistoryBuilder& Add(std::int64_t call, std::int64_t ret, KvInput in, KvOutput out,
                      std::uint64_t client) {
    ops_.push_back(KvModel::Op{client, call, ret, std::move(in), std::move(out)});
    return *this;
  }
  [[nodiscard]] const std::vector<KvModel::Op>& ops() const { return ops_; }

 private:
  std::vector<KvModel::Op> ops_;
};

}  // namespace epoch::lincheck::testing
