// Test helpers for the state tests: TempDir (tests/support's, removed at the end of the test), and
// a TestStore that wraps KvStore with one-line Put/Delete/Txn/Range calls, each applied as the
// next Raft log index.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "epoch/state/kv_store.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::server::testing {

namespace pb = etcdserverpb;

using test_support::TempDir;

inline std::unique_ptr<KvStore> OpenOrDie(const std::string& dir, KvStoreOptions options = {}) {
  Result<std::unique_ptr<KvStore>> store = KvStore::Open(dir, std::move(options));
  INFO(store.status().ToString());
  REQUIRE(store.ok());
  return std::move(*store);
}

inline pb::PutRequest PutReq(const std::string& key, const std::string& value,
                             std::int64_t lease = 0) {
  pb::PutRequest p;
  p.set_key(key);
  p.set_value(value);
  p.set_lease(lease);
  return p;
}

inline pb::RangeRequest RangeReq(const std::string& key, const std::string& end = "") {
  pb::RangeRequest r;
  r.set_key(key);
  r.set_range_end(end);
  return r;
}

inline pb::Compare Cmp(const std::string& key, pb::Compare::CompareTarget target,
                       pb::Compare::CompareResult result) {
  pb::Compare c;
  c.set_key(key);
  c.set_target(target);
  c.set_result(result);
  return c;
}

inline std::vector<std::string> Keys(const pb::RangeResponse& r) {
  std::vector<std::string> out;
  for (const auto& kv : r.kvs()) out.push_back(kv.key());
  return out;
}

// A KvStore plus the next log index to apply at.
class TestStore {
 public:
  explicit TestStore(const std::string& dir, KvStoreOptions options = {})
      : dir_(dir), options_(options), store_(OpenOrDie(dir, options)) {
    next_index_ = store_->AppliedIndex().Next();
  }

  KvStore& operator*() { return *store_; }
  KvStore* operator->() { return store_.get(); }

  // Applies `req` at the next index; REQUIREs no storage failure.
  ApplyResult Apply(v1::InternalRequest req) {
    if (req.cluster_time_ms() == 0) req.set_cluster_time_ms(clock_ms_);
    Result<ApplyResult> r = store_->Apply(next_index_, req);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    ++next_index_;
    return std::move(*r);
  }

  ApplyResult Put(const pb::PutRequest& p) {
    v1::InternalRequest req;
    *req.mutable_put() = p;
    return Apply(req);
  }
  ApplyResult Put(const std::string& key, const std::string& value, std::int64_t lease = 0) {
    return Put(PutReq(key, value, lease));
  }
  ApplyResult Delete(const std::string& key, const std::string& end = "", bool prev_kv = false) {
    v1::InternalRequest req;
    req.mutable_delete_range()->set_key(key);
    req.mutable_delete_range()->set_range_end(end);
    req.mutable_delete_range()->set_prev_kv(prev_kv);
    return Apply(req);
  }
  ApplyResult Txn(const pb::TxnRequest& t) {
    v1::InternalRequest req;
    *req.mutable_txn() = t;
    return Apply(req);
  }
  ApplyResult Compact(std::int64_t rev) {
    v1::InternalRequest req;
    req.mutable_compaction()->set_revision(rev);
    return Apply(req);
  }
  ApplyResult GrantLease(std::int64_t id, std::int64_t ttl_ms) {
    v1::InternalRequest req;
    req.mutable_lease_grant()->set_id(id);
    req.mutable_lease_grant()->set_ttl_ms(ttl_ms);
    return Apply(req);
  }
  ApplyResult RevokeLease(std::int64_t id) {
    v1::InternalRequest req;
    req.mutable_lease_revoke()->set_id(id);
    return Apply(req);
  }

  pb::RangeResponse Range(const pb::RangeRequest& r) {
    Result<pb::RangeResponse> resp = store_->Range(r);
    INFO(resp.status().ToString());
    REQUIRE(resp.ok());
    return std::move(*resp);
  }
  pb::RangeResponse Get(const std::string& key) { return Range(RangeReq(key)); }

  // Closes the store and opens it again. With options.skip_flush_on_close the close is a crash:
  // whatever was not flushed is lost.
  void Reopen() {
    store_.reset();
    store_ = OpenOrDie(dir_, options_);
    next_index_ = store_->AppliedIndex().Next();
  }

  void set_clock_ms(std::int64_t ms) { clock_ms_ = ms; }
  [[nodiscard]] LogIndex next_index() const { return next_index_; }

 private:
  std::string dir_;
  KvStoreOptions options_;
  std::unique_ptr<KvStore> store_;
  LogIndex next_index_;
  std::int64_t clock_ms_ = 1;
};

}  // namespace epoch::server::testing
