// LatencyHistogram: an HDR-like log-bucket histogram of latencies in nanoseconds, for epoch_bench.
//
// Values below 128 ns get one bucket each; above, every power of two is split into 64 linear
// sub-buckets, so a recorded value is known to within 1/64 (< 1.6 %) of itself. Values from 0 to
// 2^44 ns (about 4.9 hours) are tracked; larger ones are clamped into the last bucket and still
// raise Max(). Quantiles report the highest value of the bucket that holds them (as HdrHistogram's
// "highest equivalent value" does), clamped to the largest value actually recorded, so they never
// under-report.
//
// Callers: each load-generator thread owns one histogram and records into it without locking;
// the main thread merges them after the threads have joined. Not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace epoch::bench {

class LatencyHistogram {
 public:
  static constexpr int kLinearBits = 7;  // values < 128 are exact
  static constexpr std::uint64_t kLinearCount = 1ULL << kLinearBits;
  static constexpr int kSubBucketBits = kLinearBits - 1;  // 64 sub-buckets per octave above
  static constexpr std::uint64_t kSubBucketCount = 1ULL << kSubBucketBits;
  static constexpr int kMaxValueBits = 44;  // track values < 2^44 ns
  static constexpr std::size_t kBucketCount =
      kLinearCount + (kMaxValueBits - kLinearBits) * kSubBucketCount;
  static constexpr std::uint64_t kMaxTrackable = (1ULL << kMaxValueBits) - 1;

  void Record(std::uint64_t value_ns);
  void Merge(const LatencyHistogram& other);

  std::uint64_t Count() const { return count_; }
  std::uint64_t Max() const { return max_; }
  std::uint64_t Min() const { return count_ == 0 ? 0 : min_; }
  double Mean() const;
  // The value at quantile q in [0, 1] (0.99 = p99): the smallest recorded bucket such that at least
  // ceil(q * Count()) values are in it or below, reported as its highest value. 0 when empty.
  std::uint64_t ValueAtQuantile(double q) const;

  // Bucket arithmetic, public for tests.
  static std::size_t BucketIndex(std::uint64_t value);
  static std::uint64_t BucketLowest(std::size_t index);
  static std::uint64_t BucketHighest(std::size_t index);

 private:
  // counts_[i] = number of recorded values v with BucketIndex(v) == i; their sum is count_.
  std::array<std::uint64_t, kBucketCount> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  // Sum of recorded (unclamped) values, for the mean; long double keeps hours of ns exact enough.
  long double sum_ = 0;
};

}  // namespace epoch::bench
