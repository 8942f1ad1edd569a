// Prometheus text exposition (format 0.0.4) for /metrics: each component renders its own metrics
// through a MetricsText, and the daemon concatenates them.
//
//   MetricsText m(&out);
//   m.Gauge("epoch_raft_term", "Current Raft term.", term);
//   m.Counter("epoch_wal_fsyncs_total", "WAL group-commit fdatasyncs.", n);
//   m.Histogram("epoch_wal_fsync_seconds", "WAL fdatasync latency.", fsync_latency);
//
//   // A family with labels: the header once, then one sample per label set.
//   m.Header("etcd_network_peer_sent_bytes_total", "counter", "The total number of bytes ...");
//   m.Sample("etcd_network_peer_sent_bytes_total", {{"To", "8e9e05c52164694d"}}, bytes);
//   m.HistogramSamples("etcd_network_peer_round_trip_time_seconds", {{"To", id}}, rtt);
//
// LatencyHistogram: a cumulative latency histogram in Prometheus' form (buckets in seconds), with
// Epoch's fixed bounds. Histogram: the same with the bounds a metric defines (etcd's
// ExponentialBuckets, Prometheus' DefBuckets), so a dashboard's bucket arithmetic matches etcd's.
//
// Thread-safety: MetricsText is a writer over one string (one thread). The histograms' Observe()
// and Render() are thread-safe (relaxed atomics: a scrape may see a sample in the count before its
// bucket, as Prometheus clients allow).
#pragma once

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace epoch {

class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBoundsMs = {0.1, 0.25, 0.5, 1,  2,   4,
                                                       8,   16,   32,  64, 128, 512};

  void Observe(std::chrono::nanoseconds d) {
    const double ms = static_cast<double>(d.count()) / 1e6;
    for (std::size_t i = 0; i < kBoundsMs.size(); ++i) {
      if (ms <= kBoundsMs[i]) buckets_[i].fetch_add(1, std::memory_order_relaxed);
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(static_cast<std::uint64_t>(d.count() / 1000), std::memory_order_relaxed);
  }

  // The _bucket, _sum and _count lines of metric `name`.
  void Render(std::string_view name, std::string* out) const {
    for (std::size_t i = 0; i < kBoundsMs.size(); ++i) {
      *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBoundsMs[i] / 1000.0,
                          buckets_[i].load(std::memory_order_relaxed));
    }
    const std::uint64_t count = count_.load(std::memory_order_relaxed);
    *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count, name,
                        static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6, name,
                        count);
  }

 private:
  std::array<std::atomic<std::uint64_t>, kBoundsMs.size()> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_us_{0};
};

// One label of a sample: name and (unescaped) value.
using MetricLabel = std::pair<std::string_view, std::string>;
using MetricLabels = std::vector<MetricLabel>;

class Histogram {
 public:
  // `bounds` are the buckets' upper bounds in seconds, ascending; +Inf is implicit.
  explicit Histogram(std::vector<double> bounds);
  // Prometheus' ExponentialBuckets: start, start*factor, ..., `count` bounds.
  static std::vector<double> ExponentialBuckets(double start, double factor, std::size_t count);
  // Prometheus' DefBuckets (go-grpc-prometheus' handling-time histogram uses them).
  static std::vector<double> DefaultBuckets();

  void Observe(std::chrono::nanoseconds d);
  [[nodiscard]] std::uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  [[nodiscard]] const std::vector<double>& bounds() const { return bounds_; }
  // The _bucket, _sum and _count lines of metric `name` with `labels` (le added to the buckets).
  void Render(std::string_view name, const MetricLabels& labels, std::string* out) const;

 private:
  const std::vector<double> bounds_;
  // Observations per bucket (not cumulative; Render sums them); the last one is +Inf.
  std::unique_ptr<std::atomic<std::uint64_t>[]> buckets_;
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_ns_{0};
};

class MetricsText {
 public:
  explicit MetricsText(std::string* out) : out_(out) {}

  template <typename T>
  void Gauge(std::string_view name, std::string_view help, T value) {
    Metric("gauge", name, help, value);
  }
  template <typename T>
  void Counter(std::string_view name, std::string_view help, T value) {
    Metric("counter", name, help, value);
  }
  // A summary without quantiles: the _sum (seconds) and _count of the observations.
  void Summary(std::string_view name, std::string_view help, double sum, std::uint64_t count) {
    *out_ += fmt::format("# HELP {} {}\n# TYPE {} summary\n{}_sum {}\n{}_count {}\n", name, help,
                         name, name, sum, name, count);
  }
  // One counter family with a line per value of one label: name{label="value"} n.
  template <typename Values>
  void LabeledCounter(std::string_view name, std::string_view help, std::string_view label,
                      const Values& values) {
    *out_ += fmt::format("# HELP {} {}\n# TYPE {} counter\n", name, help, name);
    for (const auto& [value, n] : values) {
      *out_ += fmt::format("{}{{{}=\"{}\"}} {}\n", name, label, value, n);
    }
  }
  void Histogram(std::string_view name, std::string_view help, const LatencyHistogram& h) {
    Header(name, "histogram", help);
    h.Render(name, out_);
  }
  void Histogram(std::string_view name, std::string_view help, const epoch::Histogram& h) {
    Header(name, "histogram", help);
    h.Render(name, {}, out_);
  }

  // A family's # HELP and # TYPE lines; its samples follow.
  void Header(std::string_view name, std::string_view type, std::string_view help) {
    *out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  template <typename T>
  void Sample(std::string_view name, const MetricLabels& labels, T value) {
    *out_ += fmt::format("{}{} {}\n", name, FormatLabels(labels), value);
  }
  void HistogramSamples(std::string_view name, const MetricLabels& labels,
                        const epoch::Histogram& h) {
    h.Render(name, labels, out_);
  }

  // `{a="x",b="y"}` with the values escaped as the format requires; empty for no labels.
  static std::string FormatLabels(const MetricLabels& labels);

 private:
  template <typename T>
  void Metric(std::string_view type, std::string_view name, std::string_view help, T value) {
    *out_ +=
        fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  }

  std::string* out_;
};

}  // namespace epoch
