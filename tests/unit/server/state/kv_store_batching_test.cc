// Batching must not change anything: a log applied one entry per ApplyBatch and the same log
// applied in batches of any size give the same responses, events and state. The batch writes
// history (revision records, per-key index) past its index, so this covers entries that read
// history after earlier entries of the same batch wrote it: txn Ranges at old revisions and
// compactions.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

// A random log over five keys. Revisions named by ranges and compactions go up to `max_rev`, a
// bound on the store's revision, so some are in the future or already compacted (errors that
// must also be the same).
std::vector<v1::InternalRequest> RandomLog(std::mt19937* rng, int n) {
  auto pick = [rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(*rng); };
  auto key = [&] { return std::string(1, static_cast<char>('a' + pick(0, 4))); };
  std::vector<v1::InternalRequest> log;
  int max_rev = 1;
  for (int i = 0; i < n; ++i) {
    v1::InternalRequest req;
    req.set_cluster_time_ms(1);
    const int kind = pick(0, 9);
    if (kind <= 3) {
      *req.mutable_put() = PutReq(key(), "v" + std::to_string(i));
      req.mutable_put()->set_prev_kv(pick(0, 1) == 1);
      ++max_rev;
    } else if (kind == 4) {
      req.mutable_delete_range()->set_key(key());
      if (pick(0, 1) == 1) req.mutable_delete_range()->set_range_end("z");
      req.mutable_delete_range()->set_prev_kv(true);
      ++max_rev;
    } else if (kind <= 7) {
      // Range at an old revision, a put, and the same range again (now behind the txn's write).
      pb::TxnRequest& t = *req.mutable_txn();
      pb::RangeRequest range = RangeReq(key(), pick(0, 1) == 1 ? "z" : "");
      range.set_revision(pick(1, max_rev));
      *t.add_success()->mutable_request_range() = range;
      *t.add_success()->mutable_request_put() = PutReq(key(), "t" + std::to_string(i));
      *t.add_success()->mutable_request_range() = range;
      pb::TxnRequest& nested = *t.add_failure()->mutable_request_txn();
      *nested.add_success()->mutable_request_range() = range;
      *t.add_compare() = Cmp(key(), pb::Compare::VERSION,
                             pick(0, 1) == 1 ? pb::Compare::GREATER : pb::Compare::LESS);
      ++max_rev;
    } else {
      req.mutable_compaction()->set_revision(pick(1, max_rev));
    }
    log.push_back(std::move(req));
  }
  return log;
}

void CheckSame(const ApplyResult& one, const ApplyResult& batched, std::size_t i) {
  INFO("entry " << i);
  CHECK(one.status.ToString() == batched.status.ToString());
  CHECK(one.revision == batched.revision);
  CHECK(one.response.SerializeAsString() == batched.response.SerializeAsString());
  REQUIRE(one.events.size() == batched.events.size());
  for (std::size_t e = 0; e < one.events.size(); ++e) {
    CHECK(one.events[e].SerializeAsString() == batched.events[e].SerializeAsString());
  }
}

TEST_CASE("a log applied in batches of any size gives the same results and state",
          "[server][durability][batching]") {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    const std::vector<v1::InternalRequest> log = RandomLog(&rng, 300);
    TempDir d1;
    TempDir d2;
    TestStore one(d1.path());
    TestStore batched(d2.path());
    std::vector<ApplyResult> singles;
    for (std::size_t i = 0; i < log.size(); ++i) {
      Result<ApplyResult> r = one->Apply(LogIndex(i + 1), log[i]);
      REQUIRE(r.ok());
      singles.push_back(std::move(*r));
    }
    std::size_t next = 0;
    while (next < log.size()) {
      const std::size_t n = std::min<std::size_t>(
          log.size() - next, std::uniform_int_distribution<std::size_t>(1, 24)(rng));
      std::vector<ApplyInput> inputs;
      for (std::size_t i = next; i < next + n; ++i) {
        inputs.push_back(ApplyInput{LogIndex(i + 1), &log[i]});
      }
      Result<std::vector<ApplyResult>> r = batched->ApplyBatch(inputs);
      REQUIRE(r.ok());
      for (std::size_t i = 0; i < n; ++i) CheckSame(singles[next + i], (*r)[i], next + i);
      next += n;
    }
    CHECK(batched->AppliedIndex() == one->AppliedIndex());
    CHECK(batched->CurrentRevision() == one->CurrentRevision());
    CHECK(batched->CompactRevision() == one->CompactRevision());
    CHECK(*batched->StateHash() == *one->StateHash());
    batched.Reopen();
    CHECK(*batched->StateHash() == *one->StateHash());
  }
}

}  // namespace
}  // namespace epoch::server
