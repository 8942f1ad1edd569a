// Tests of epoch_bench's pieces that need no server: the latency histogram's bucket arithmetic
// and quantiles, the workload encodings and CAS reply handling, JSON escaping.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#include <random>

#include "histogram.h"
#include "report.h"
#include "workload.h"

namespace epoch::bench {
namespace {

TEST_CASE("every bucket maps its lowest and highest values back to itself", "[histogram]") {
  using H = LatencyHistogram;
  for (std::size_t i = 0; i < H::kBucketCount; ++i) {
    const std::uint64_t lo = H::BucketLowest(i);
    const std::uint64_t hi = H::BucketHighest(i);
    REQUIRE(lo <= hi);
    REQUIRE(H::BucketIndex(lo) == i);
    REQUIRE(H::BucketIndex(hi) == i);
    if (i + 1 < H::kBucketCount) REQUIRE(H::BucketIndex(hi + 1) == i + 1);
    // Width of a bucket is at most 1/64 of its lowest value above the exact range.
    if (lo >= H::kLinearCount) REQUIRE((hi - lo + 1) * 64 <= lo);
  }
  REQUIRE(H::BucketIndex(H::kMaxTrackable) == H::kBucketCount - 1);
  REQUIRE(H::BucketIndex(UINT64_MAX) == H::kBucketCount - 1);
}

TEST_CASE("an empty histogram reports zeros", "[histogram]") {
  LatencyHistogram h;
  REQUIRE(h.Count() == 0);
  REQUIRE(h.ValueAtQuantile(0.99) == 0);
  REQUIRE(h.Mean() == 0.0);
  REQUIRE(h.Min() == 0);
}

TEST_CASE("exact values below 128 ns and a single value", "[histogram]") {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 100; ++v) h.Record(v);
  REQUIRE(h.ValueAtQuantile(0.5) == 50);
  REQUIRE(h.ValueAtQuantile(0.99) == 99);
  REQUIRE(h.ValueAtQuantile(1.0) == 100);
  REQUIRE(h.ValueAtQuantile(0.0) == 1);
  REQUIRE(h.Mean() == Approx(50.5));
  LatencyHistogram one;
  one.Record(12'345'678);
  // Clamped to the recorded max, never below the true value.
  REQUIRE(one.ValueAtQuantile(0.5) == 12'345'678);
  REQUIRE(one.ValueAtQuantile(0.999) == 12'345'678);
}

TEST_CASE("quantiles of a uniform sample are within the bucket precision", "[histogram]") {
  LatencyHistogram h;
  for (std::uint64_t v = 1; v <= 1'000'000; ++v) h.Record(v * 1000);  // 1 us .. 1 s
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = q * 1e9;
    const double got = static_cast<double>(h.ValueAtQuantile(q));
    REQUIRE(got >= exact);  // never under-reports
    REQUIRE(got <= exact * (1 + 1.0 / 64));
  }
  REQUIRE(h.Max() == 1'000'000'000);
  REQUIRE(h.Min() == 1000);
}

TEST_CASE("merging equals recording everything in one histogram", "[histogram]") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(13.0, 1.5);  // around 0.5 ms, heavy tail
  LatencyHistogram all, a, b;
  for (int i = 0; i < 50'000; ++i) {
    const auto v = static_cast<std::uint64_t>(dist(rng));
    all.Record(v);
    (i % 3 == 0 ? a : b).Record(v);
  }
  a.Merge(b);
  REQUIRE(a.Count() == all.Count());
  REQUIRE(a.Max() == all.Max());
  REQUIRE(a.Min() == all.Min());
  for (double q : {0.1, 0.5, 0.99, 0.999}) REQUIRE(a.ValueAtQuantile(q) == all.ValueAtQuantile(q));
}

TEST_CASE("values beyond the tracked range land in the last bucket", "[histogram]") {
  LatencyHistogram h;
  h.Record(LatencyHistogram::kMaxTrackable + 1000);
  REQUIRE(h.Count() == 1);
  REQUIRE(h.Max() == LatencyHistogram::kMaxTrackable + 1000);
  REQUIRE(h.ValueAtQuantile(0.5) == LatencyHistogram::kMaxTrackable);
}

TEST_CASE("workload names round-trip", "[workload]") {
  for (Workload w : {Workload::kPut, Workload::kGet, Workload::kGetSerializable,
                     Workload::kTxnCasMod, Workload::kTxnCasValue}) {
    REQUIRE(ParseWorkload(WorkloadName(w)) == w);
  }
  REQUIRE_FALSE(ParseWorkload("range").has_value());
  REQUIRE(IsCas(Workload::kTxnCasValue));
  REQUIRE_FALSE(IsCas(Workload::kGet));
}

TEST_CASE("keys are zero-padded so they sort by index", "[workload]") {
  KeySpace keys("bench/", 1000);
  std::string a, b;
  keys.Format(42, &a);
  keys.Format(999, &b);
  REQUIRE(a == "bench/00000042");
  REQUIRE(a < b);
}

TEST_CASE("CAS values carry their counter", "[workload]") {
  const std::string v = EncodeCasValue(0xabcdef, 64);
  REQUIRE(v.size() == 64);
  REQUIRE(DecodeCasValue(v) == 0xabcdefULL);
  REQUIRE(EncodeCasValue(3, 4).size() == 16);  // never shorter than the counter
  REQUIRE_FALSE(DecodeCasValue("123").has_value());
  REQUIRE_FALSE(DecodeCasValue("zzzzzzzzzzzzzzzz....").has_value());
  REQUIRE(RandomValue(100, 1).size() == 100);
  REQUIRE(RandomValue(100, 1) == RandomValue(100, 1));
  REQUIRE(RandomValue(100, 1) != RandomValue(100, 2));
}

TEST_CASE("the mod-revision CAS is one compare, a put on success, a range on failure",
          "[workload]") {
  etcdserverpb::TxnRequest req;
  BuildCasMod("k", 17, "v", &req);
  REQUIRE(req.compare_size() == 1);
  REQUIRE(req.compare(0).target() == etcdserverpb::Compare::MOD);
  REQUIRE(req.compare(0).result() == etcdserverpb::Compare::EQUAL);
  REQUIRE(req.compare(0).mod_revision() == 17);
  REQUIRE(req.success(0).request_put().key() == "k");
  REQUIRE(req.success(0).request_put().value() == "v");
  REQUIRE(req.failure(0).request_range().key() == "k");
  BuildCasValue("k", "old", "new", &req);  // reuses the message: no leftovers
  REQUIRE(req.compare_size() == 1);
  REQUIRE(req.success_size() == 1);
  REQUIRE(req.compare(0).target() == etcdserverpb::Compare::VALUE);
  REQUIRE(req.compare(0).value() == "old");
  REQUIRE(req.success(0).request_put().value() == "new");
}

TEST_CASE("CAS replies update what the client believes", "[workload]") {
  CasCache cache(4);
  etcdserverpb::TxnResponse ok;
  ok.set_succeeded(true);
  ok.mutable_header()->set_revision(99);
  REQUIRE(ApplyCasReply(Workload::kTxnCasValue, 2, 5, ok, &cache));
  REQUIRE(cache.mod_revision(2) == 99);
  REQUIRE(cache.counter(2) == 5);

  etcdserverpb::TxnResponse lost;
  lost.set_succeeded(false);
  mvccpb::KeyValue* kv = lost.add_responses()->mutable_response_range()->add_kvs();
  kv->set_mod_revision(120);
  kv->set_value(EncodeCasValue(9, 32));
  REQUIRE(ApplyCasReply(Workload::kTxnCasValue, 2, 6, lost, &cache));
  REQUIRE(cache.mod_revision(2) == 120);
  REQUIRE(cache.counter(2) == 9);

  etcdserverpb::TxnResponse malformed;
  malformed.set_succeeded(false);
  REQUIRE_FALSE(ApplyCasReply(Workload::kTxnCasMod, 1, 0, malformed, &cache));
}

TEST_CASE("JSON strings are escaped", "[report]") {
  REQUIRE(JsonString("a\"b\\c\n") == "\"a\\\"b\\\\c\\n\"");
  REQUIRE(JsonString(std::string("\x01", 1)) == "\"\\u0001\"");
}

}  // namespace
}  // namespace epoch::bench
