// The bound on a write txn's reads at apply time (InternalRequest.txn_read_keys_max,
// --max-txn-read-keys): the reads run on the Raft thread, so a txn may not scan without limit.
#include <catch2/catch.hpp>

#include "epoch/etcd_errors.h"
#include "epoch/metrics_text.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

// A txn that reads [a, z) `reads` times (count_only when asked) and then puts "w".
ApplyResult ReadAndWrite(TestStore& s, int reads, std::int64_t bound, bool count_only = false,
                         std::int64_t revision = 0) {
  v1::InternalRequest req;
  pb::TxnRequest* t = req.mutable_txn();
  for (int i = 0; i < reads; ++i) {
    pb::RangeRequest* r = t->add_success()->mutable_request_range();
    *r = RangeReq("a", "z");
    r->set_count_only(count_only);
    r->set_limit(1);
    r->set_revision(revision);
  }
  *t->add_success()->mutable_request_put() = PutReq("w", "written");
  req.set_txn_read_keys_max(bound);
  return s.Apply(req);
}

std::string Metrics(KvStore& store) {
  std::string out;
  MetricsText m(&out);
  store.RenderMetrics(m);
  return out;
}

TEST_CASE("a write txn's reads stop at its entry's bound and the txn writes nothing",
          "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  for (int i = 0; i < 20; ++i) s.Put(fmt::format("k{:02}", i), "v");  // revisions 2..21
  const Revision before = s->CurrentRevision();

  // 3 reads of 20 keys each need 60 key visits; a limit does not make the count cheaper.
  ApplyResult refused = ReadAndWrite(s, 3, 59);
  CHECK(refused.status.Is(ErrorId::kTxnReadTooLarge));
  CHECK(s->CurrentRevision() == before);
  CHECK(s.Get("w").kvs_size() == 0);
  CHECK(ReadAndWrite(s, 3, 59, /*count_only=*/true).status.Is(ErrorId::kTxnReadTooLarge));
  // Reads of a past revision (the index, not the latest table) are bounded the same way.
  CHECK(ReadAndWrite(s, 3, 50, false, 20).status.Is(ErrorId::kTxnReadTooLarge));  // 3 x 19
  CHECK(Metrics(*s).find("epoch_txn_read_limit_refused_total{stage=\"apply\"} 3") !=
        std::string::npos);

  ApplyResult exact = ReadAndWrite(s, 3, 60);
  INFO(exact.status.ToString());
  REQUIRE(exact.status.ok());
  CHECK(exact.response.txn().responses(0).response_range().count() == 20);
  CHECK(s.Get("w").kvs_size() == 1);
  // Entries without a bound (written before it existed, or by internal recipes) are not bounded.
  CHECK(ReadAndWrite(s, 10, 0).status.ok());
}

// The same txn as ReadAndWrite, as the API layer hands it to PrecheckTxnReads.
pb::TxnRequest Reads(int reads, const std::string& key = "a", const std::string& end = "z") {
  pb::TxnRequest t;
  for (int i = 0; i < reads; ++i) *t.add_success()->mutable_request_range() = RangeReq(key, end);
  *t.add_success()->mutable_request_put() = PutReq("w", "written");
  return t;
}

TEST_CASE("the read bound is checked before the log, on the path the applied state takes",
          "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  for (int i = 0; i < 20; ++i) s.Put(fmt::format("k{:02}", i), "v");
  const Revision before = s->CurrentRevision();

  // The apply's arithmetic: 60 visits pass a bound of 59 and not one of 60.
  CHECK(s->PrecheckTxnReads(Reads(3), {59}).Is(ErrorId::kTxnReadTooLarge));
  CHECK(s->PrecheckTxnReads(Reads(3), {60}).ok());
  CHECK(s->PrecheckTxnReads(Reads(3), {0}).ok());  // no bound
  // It changes nothing, and it is counted apart from the apply's refusals.
  CHECK(s->CurrentRevision() == before);
  const std::string metrics = Metrics(*s);
  CHECK(metrics.find("epoch_txn_read_limit_refused_total{stage=\"precheck\"} 1") !=
        std::string::npos);
  CHECK(metrics.find("epoch_txn_read_limit_refused_total{stage=\"apply\"} 0") != std::string::npos);

  SECTION("nested txns count on the branch their compares take on the applied state") {
    pb::TxnRequest t;
    pb::TxnRequest* nested = t.add_success()->mutable_request_txn();
    *nested->add_compare() = Cmp("k00", pb::Compare::VERSION, pb::Compare::EQUAL);
    nested->mutable_compare(0)->set_version(1);
    *nested->add_success()->mutable_request_range() = RangeReq("a", "z");
    *nested->add_success()->mutable_request_range() = RangeReq("a", "z");
    *nested->add_failure()->mutable_request_range() = RangeReq("k00");
    CHECK(s->PrecheckTxnReads(t, {39}).Is(ErrorId::kTxnReadTooLarge));  // k00 is at version 1
    nested->mutable_compare(0)->set_version(2);
    CHECK(s->PrecheckTxnReads(t, {39}).ok());  // the failure branch reads one key
  }
  SECTION("reads after a DeleteRange are not counted: they would see the deletion") {
    pb::TxnRequest t;
    pb::DeleteRangeRequest* del = t.add_success()->mutable_request_delete_range();
    del->set_key("a");
    del->set_range_end("z");
    *t.add_success()->mutable_request_range() = RangeReq("a", "z");
    CHECK(s->PrecheckTxnReads(t, {5}).ok());
    v1::InternalRequest req;
    *req.mutable_txn() = t;
    req.set_txn_read_keys_max(5);
    CHECK(s.Apply(req).status.ok());  // and the apply agrees
  }
  SECTION("a compare over a range is left to the apply when the bound does not count compares") {
    pb::TxnRequest t = Reads(3);
    pb::Compare* c = t.add_compare();
    *c = Cmp("a", pb::Compare::VERSION, pb::Compare::GREATER);
    c->set_range_end("z");
    CHECK(s->PrecheckTxnReads(t, {59}).ok());
  }
  SECTION("a read the apply would refuse for another reason is left to the apply") {
    pb::TxnRequest t = Reads(3);
    t.mutable_success(0)->mutable_request_range()->set_revision(1000);  // a future revision
    CHECK(s->PrecheckTxnReads(t, {10}).ok());
  }
}

// A write txn whose compares span [a, z) (`range_compares` of them, each over all 20 keys) and
// `single_compares` single-key compares, then the success branch of ReadAndWrite.
v1::InternalRequest ComparesAndReads(int range_compares, int single_compares, int reads,
                                     TxnReadBound bound) {
  v1::InternalRequest req;
  pb::TxnRequest* t = req.mutable_txn();
  for (int i = 0; i < range_compares; ++i) {
    pb::Compare* c = t->add_compare();
    *c = Cmp("a", pb::Compare::VERSION, pb::Compare::GREATER);  // version > 0: every key holds
    c->set_range_end("z");
  }
  for (int i = 0; i < single_compares; ++i) {
    *t->add_compare() = Cmp(fmt::format("k{:02}", i), pb::Compare::VERSION, pb::Compare::GREATER);
  }
  for (int i = 0; i < reads; ++i) *t->add_success()->mutable_request_range() = RangeReq("a", "z");
  *t->add_success()->mutable_request_put() = PutReq("w", "written");
  req.set_txn_read_keys_max(bound.max_keys);
  req.set_txn_read_bound_counts_compares(bound.counts_compares);
  return req;
}

TEST_CASE("a bound that counts compares stops a compare over a range, at apply and before the log",
          "[server][txn]") {
  TempDir dir;
  TestStore s(dir.path());
  for (int i = 0; i < 20; ++i) s.Put(fmt::format("k{:02}", i), "v");
  const Revision before = s->CurrentRevision();

  SECTION("at apply: the compare's keys and the reads' keys share one bound") {
    // Two range compares (40 keys), two single-key compares (2) and one read (20): 62 visits.
    CHECK(s.Apply(ComparesAndReads(2, 2, 1, {61, true})).status.Is(ErrorId::kTxnReadTooLarge));
    CHECK(s->CurrentRevision() == before);
    CHECK(s.Get("w").kvs_size() == 0);
    ApplyResult exact = s.Apply(ComparesAndReads(2, 2, 1, {62, true}));
    INFO(exact.status.ToString());
    REQUIRE(exact.status.ok());
    CHECK(exact.response.txn().succeeded());
    CHECK(s.Get("w").kvs_size() == 1);
  }
  SECTION("a compare over more keys than the bound fails the txn with no Range op at all") {
    CHECK(s.Apply(ComparesAndReads(1, 0, 0, {19, true})).status.Is(ErrorId::kTxnReadTooLarge));
    CHECK(s.Apply(ComparesAndReads(1, 0, 0, {20, true})).status.ok());
  }
  SECTION("entries whose bound does not count compares apply as they did") {
    CHECK(s.Apply(ComparesAndReads(2, 2, 1, {20, false})).status.ok());
  }
  SECTION("a failing compare ends its list: the compares after it are not read") {
    v1::InternalRequest req = ComparesAndReads(0, 0, 0, {5, true});
    pb::TxnRequest* t = req.mutable_txn();
    *t->add_compare() = Cmp("k00", pb::Compare::VERSION, pb::Compare::EQUAL);  // version 1 != 0
    pb::Compare* wide = t->add_compare();
    *wide = Cmp("a", pb::Compare::VERSION, pb::Compare::GREATER);
    wide->set_range_end("z");
    ApplyResult r = s.Apply(req);
    REQUIRE(r.status.ok());
    CHECK_FALSE(r.response.txn().succeeded());
  }
  SECTION("before the log: the same arithmetic, counted as a precheck refusal") {
    const pb::TxnRequest t = ComparesAndReads(2, 2, 1, {}).txn();
    CHECK(s->PrecheckTxnReads(t, {61, true}).Is(ErrorId::kTxnReadTooLarge));
    CHECK(s->PrecheckTxnReads(t, {62, true}).ok());
    CHECK(s->PrecheckTxnReads(ComparesAndReads(1, 0, 0, {}).txn(), {19, true})
              .Is(ErrorId::kTxnReadTooLarge));
    CHECK(Metrics(*s).find("epoch_txn_read_limit_refused_total{stage=\"precheck\"} 2") !=
          std::string::npos);
  }
}

}  // namespace
}  // namespace epoch::server
