// Rng: the core's deterministic PRNG (SplitMix64, Steele/Lea/Flood 2014). Seeded once at Node
// construction; the only source of randomness in raft/ (election timeout jitter), so one seed
// reproduces a run.
//
// Threading: owned by one Raft instance.
#pragma once

#include <cstdint>

namespace epoch::raft {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, bound); bound > 0. The modulo bias is below 2^-50 for the small bounds used.
  std::int64_t Uniform(std::int64_t bound) {
    return static_cast<std::int64_t>(Next() % static_cast<std::uint64_t>(bound));
  }

 private:
  std::uint64_t state_;
};

}  // namespace epoch::raft
