// --max-response-bytes: a Range or read-only Txn whose answer would be larger is refused with
// RESOURCE_EXHAUSTED naming the flag, counted in /metrics; smaller answers are unaffected.
#include <fmt/format.h>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

TEST_CASE("a Range answer larger than --max-response-bytes is refused and counted",
          "[integration][limits]") {
  auto cluster =
      StartCluster(1, {"--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks",
                       "15", "--max-response-bytes", "65536"});
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(*leader));
  for (int i = 0; i < 100; ++i) {
    REQUIRE(Put(*kv, fmt::format("big/{:03}", i), std::string(1024, 'v')).ok());
  }

  etcdserverpb::RangeRequest all;
  all.set_key("big/");
  all.set_range_end(PrefixEnd("big/"));
  etcdserverpb::RangeResponse response;
  grpc::Status refused = Range(*kv, all, &response);
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(refused.error_message(), Catch::Contains("--max-response-bytes (65536)"));

  // Under the bound: a limit, keys only, a count.
  etcdserverpb::RangeRequest limited = all;
  limited.set_limit(20);
  REQUIRE(Range(*kv, limited, &response).ok());
  CHECK(response.kvs_size() == 20);
  CHECK(response.more());
  etcdserverpb::RangeRequest keys_only = all;
  keys_only.set_keys_only(true);
  REQUIRE(Range(*kv, keys_only, &response).ok());
  CHECK(response.kvs_size() == 100);

  // A read-only txn reading the same range is refused the same way.
  etcdserverpb::TxnRequest txn;
  *txn.add_success()->mutable_request_range() = all;
  etcdserverpb::TxnResponse txn_response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Status txn_status = kv->Txn(&ctx, txn, &txn_response);
  CHECK(txn_status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);

  CHECK(cluster->Metric(*leader, "epoch_kv_responses_too_large_total").value_or(0) == 2);
  // etcdctl sees the error, and the member keeps serving.
  EtcdctlFails(*cluster, {"get", "big/", "--prefix"},
               "rpc error: code = ResourceExhausted desc = epoch: the response of");
  RequireServing(*cluster, *leader, "after-large-range");
}

}  // namespace
}  // namespace epoch::integration
