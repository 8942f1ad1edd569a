// SimNetwork: the simulated network between nodes (peer messages) and between clients and nodes.
// Each directed peer link i -> j has its own drop, duplication, delay and jitter (random delay per
// message, hence reordering) and can be cut independently of j -> i, so every partition shape is a
// set of cut directed links: full (two sides), asymmetric (one direction), leader isolated from
// its followers while clients still reach it, majorities ring. Client links are modelled per node
// (reachable or not) with their own small delay.
//
// Who uses it: Simulation routes every message through Route() and re-checks Cut() at delivery
// (a link cut while a message is in flight loses it); the Nemesis changes links.
//
// Threading: single-threaded, owned by the Simulation.
#pragma once

#include <cstdint>
#include <vector>

#include "prng.h"

namespace epoch::sim {

struct LinkState {
  double drop = 0.0;       // probability a message is lost
  double duplicate = 0.0;  // probability a message is delivered twice
  std::int64_t delay_min_us = 0;
  std::int64_t delay_max_us = 0;  // per-message delay uniform in [min, max]: reordering
  bool cut = false;
};

class SimNetwork {
 public:
  // `slots` nodes (indices 0..slots-1); every link starts as `base`.
  SimNetwork(int slots, const LinkState& base, std::int64_t client_delay_max_us, Prng rng);

  // Delivery times of one message sent now on from -> to: none (dropped or cut), one, or two
  // (duplicated). Each copy has its own delay.
  std::vector<std::int64_t> Route(int from, int to, std::int64_t now);
  [[nodiscard]] bool Cut(int from, int to) const { return link(from, to).cut; }

  LinkState& link(int from, int to) { return links_[from * slots_ + to]; }
  [[nodiscard]] const LinkState& link(int from, int to) const { return links_[from * slots_ + to]; }
  [[nodiscard]] const LinkState& base() const { return base_; }

  // Client <-> node: a reachable node answers after a small delay; an unreachable one never.
  [[nodiscard]] bool ClientReachable(int node) const { return client_reachable_[node]; }
  void SetClientReachable(int node, bool reachable) { client_reachable_[node] = reachable; }
  std::int64_t ClientDelay() { return rng_.Range(20, client_delay_max_us_); }

  // Cuts every link between the two groups, in both directions.
  void CutBetween(const std::vector<int>& a, const std::vector<int>& b);
  // Back to the base link parameters everywhere; every link and client link restored.
  void HealAll();
  // Only the cuts are removed (degraded links stay).
  void HealCuts();
  [[nodiscard]] int slots() const { return slots_; }

  std::uint64_t delivered = 0;
  std::uint64_t dropped = 0;
  std::uint64_t duplicated = 0;

 private:
  int slots_;
  LinkState base_;
  std::int64_t client_delay_max_us_;
  std::vector<LinkState> links_;
  std::vector<bool> client_reachable_;
  Prng rng_;
};

}  // namespace epoch::sim
