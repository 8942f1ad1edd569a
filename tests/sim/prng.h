// Prng: the simulator's only source of randomness: xoshiro256** seeded through splitmix64.
// One 64-bit seed drives a whole run; each component (network, disks, clients, nemesis, each
// node's core) gets its own stream from Fork(), so adding a draw in one component does not shift
// the draws of the others, and a run replays exactly from its seed.
//
// Threading: a plain value; one owner.
#pragma once

#include <cstdint>

namespace epoch::sim {

class Prng {
 public:
  explicit Prng(std::uint64_t seed) {
    std::uint64_t x = seed;
    for (std::uint64_t& word : state_) word = SplitMix(x);
  }

  std::uint64_t Next() {
    const std::uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, n); n > 0. (The modulo bias is below 2^-40 for the n we use.)
  std::uint64_t Below(std::uint64_t n) { return Next() % n; }
  // Uniform in [lo, hi].
  std::int64_t Range(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(hi - lo) + 1));
  }
  // Uniform in [0, 1).
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Unit() < p; }

  // An independent stream for a component, derived from this generator's seed material.
  [[nodiscard]] Prng Fork(std::uint64_t stream) const {
    std::uint64_t x = state_[0] ^ (stream * 0x9e3779b97f4a7c15ULL);
    return Prng(SplitMix(x) ^ state_[3]);
  }

  static std::uint64_t SplitMix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  static std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t state_[4];
};

}  // namespace epoch::sim
