#include "epoch/metrics_text.h"

#include <algorithm>
#include <cassert>

namespace epoch {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      buckets_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
  assert(std::is_sorted(bounds_.begin(), bounds_.end()));
}

std::vector<double> Histogram::ExponentialBuckets(double start, double factor, std::size_t count) {
  std::vector<double> out;
  out.reserve(count);
  double bound = start;
  for (std::size_t i = 0; i < count; ++i, bound *= factor) out.push_back(bound);
  return out;
}

std::vector<double> Histogram::DefaultBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

void Histogram::Observe(std::chrono::nanoseconds d) {
  const std::int64_t ns = std::max<std::int64_t>(d.count(), 0);
  const double seconds = static_cast<double>(ns) / 1e9;
  // The first bound >= the value: Prometheus buckets are "less than or equal".
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  buckets_[static_cast<std::size_t>(it - bounds_.begin())].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::Render(std::string_view name, const MetricLabels& labels, std::string* out) const {
  MetricLabels with_le = labels;
  with_le.emplace_back("le", "");
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    with_le.back().second = i < bounds_.size() ? fmt::format("{}", bounds_[i]) : "+Inf";
    *out += fmt::format("{}_bucket{} {}\n", name, MetricsText::FormatLabels(with_le), cumulative);
  }
  // The count is at least the buckets' sum, so _count never lags a bucket in one scrape.
  const std::uint64_t count = std::max(count_.load(std::memory_order_relaxed), cumulative);
  const std::string label_text = MetricsText::FormatLabels(labels);
  *out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, label_text,
                      static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9, name,
                      label_text, count);
}

std::string MetricsText::FormatLabels(const MetricLabels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ',';
    out += labels[i].first;
    out += "=\"";
    for (char c : labels[i].second) {
      if (c == '\\') {
        out += "\\\\";
      } else if (c == '"') {
        out += "\\\"";
      } else if (c == '\n') {
        out += "\\n";
      } else {
        out += c;
      }
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace epoch
