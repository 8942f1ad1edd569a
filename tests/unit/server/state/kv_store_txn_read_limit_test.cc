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
  CHECK(Metrics(*s).find("epoch_txn_read_limit_refused_total 3") != std::string::npos);

  ApplyResult exact = ReadAndWrite(s, 3, 60);
  INFO(exact.status.ToString());
  REQUIRE(exact.status.ok());
  CHECK(exact.response.txn().responses(0).response_range().count() == 20);
  CHECK(s.Get("w").kvs_size() == 1);
  // Entries without a bound (written before it existed, or by internal recipes) are not bounded.
  CHECK(ReadAndWrite(s, 10, 0).status.ok());
}

}  // namespace
}  // namespace epoch::server
