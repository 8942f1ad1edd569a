#include "histogram.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>

namespace epoch::bench {

std::size_t LatencyHistogram::BucketIndex(std::uint64_t value) {
  value = std::min(value, kMaxTrackable);
  if (value < kLinearCount) return static_cast<std::size_t>(value);
  // msb >= kLinearBits. Keep the top kLinearBits bits: top in [64, 128).
  const int msb = 63 - std::countl_zero(value);
  const int shift = msb - kSubBucketBits;  // >= 1
  const std::uint64_t top = value >> shift;
  assert(top >= kSubBucketCount && top < 2 * kSubBucketCount);
  return static_cast<std::size_t>(kLinearCount + (shift - 1) * kSubBucketCount +
                                  (top - kSubBucketCount));
}

std::uint64_t LatencyHistogram::BucketLowest(std::size_t index) {
  assert(index < kBucketCount);
  if (index < kLinearCount) return index;
  const std::uint64_t k = index - kLinearCount;
  const int shift = static_cast<int>(k / kSubBucketCount) + 1;
  const std::uint64_t top = k % kSubBucketCount + kSubBucketCount;
  return top << shift;
}

std::uint64_t LatencyHistogram::BucketHighest(std::size_t index) {
  if (index + 1 == kBucketCount) return kMaxTrackable;
  return BucketLowest(index + 1) - 1;
}

void LatencyHistogram::Record(std::uint64_t value_ns) {
  ++counts_[BucketIndex(value_ns)];
  ++count_;
  max_ = std::max(max_, value_ns);
  min_ = std::min(min_, value_ns);
  sum_ += static_cast<long double>(value_ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kBucketCount; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
  sum_ += other.sum_;
}

double LatencyHistogram::Mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_ / static_cast<long double>(count_));
}

std::uint64_t LatencyHistogram::ValueAtQuantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Rank of the value we want, 1-based: at least one value, at most all of them.
  const auto rank = std::clamp<std::uint64_t>(
      static_cast<std::uint64_t>(std::ceil(q * static_cast<double>(count_))), 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(BucketHighest(i), max_);
  }
  return max_;
}

}  // namespace epoch::bench
