#include "epoch/metrics_text.h"

#include <catch2/catch.hpp>

namespace epoch {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST_CASE("ExponentialBuckets are etcd's", "[common][metrics]") {
  // etcd's WAL fsync histogram: prometheus.ExponentialBuckets(0.001, 2, 14), 1 ms to 8.192 s.
  std::vector<double> b = Histogram::ExponentialBuckets(0.001, 2, 14);
  REQUIRE(b.size() == 14);
  CHECK(b.front() == Approx(0.001));
  CHECK(b.back() == Approx(8.192));
  CHECK(Histogram::DefaultBuckets().size() == 11);
}

TEST_CASE("Histogram buckets are cumulative with le labels", "[common][metrics]") {
  Histogram h({0.001, 0.01, 0.1});
  h.Observe(microseconds(500));   // <= 1 ms
  h.Observe(milliseconds(1));     // on the bound: in the 1 ms bucket
  h.Observe(milliseconds(50));    // <= 100 ms
  h.Observe(milliseconds(2000));  // +Inf only
  std::string out;
  h.Render("x_seconds", {{"To", "a"}}, &out);
  CHECK(out ==
        "x_seconds_bucket{To=\"a\",le=\"0.001\"} 2\n"
        "x_seconds_bucket{To=\"a\",le=\"0.01\"} 2\n"
        "x_seconds_bucket{To=\"a\",le=\"0.1\"} 3\n"
        "x_seconds_bucket{To=\"a\",le=\"+Inf\"} 4\n"
        "x_seconds_sum{To=\"a\"} 2.0515\n"
        "x_seconds_count{To=\"a\"} 4\n");
  CHECK(h.count() == 4);
}

TEST_CASE("Label values are escaped", "[common][metrics]") {
  CHECK(MetricsText::FormatLabels({{"a", "x\"y\\z\nw"}, {"b", ""}}) ==
        "{a=\"x\\\"y\\\\z\\nw\",b=\"\"}");
  CHECK(MetricsText::FormatLabels({}).empty());
}

TEST_CASE("A labelled family has one header and a sample per label set", "[common][metrics]") {
  std::string out;
  MetricsText m(&out);
  m.Header("grpc_server_started_total", "counter", "RPCs started.");
  m.Sample("grpc_server_started_total", {{"grpc_method", "Range"}}, 3);
  m.Sample("grpc_server_started_total", {{"grpc_method", "Put"}}, 1);
  CHECK(out ==
        "# HELP grpc_server_started_total RPCs started.\n"
        "# TYPE grpc_server_started_total counter\n"
        "grpc_server_started_total{grpc_method=\"Range\"} 3\n"
        "grpc_server_started_total{grpc_method=\"Put\"} 1\n");
}

}  // namespace
}  // namespace epoch
