#include "network.h"

namespace epoch::sim {

SimNetwork::SimNetwork(int slots, const LinkState& base, std::int64_t client_delay_max_us, Prng rng)
    : slots_(slots),
      base_(base),
      client_delay_max_us_(client_delay_max_us),
      links_(static_cast<std::size_t>(slots * slots), base),
      client_reachable_(static_cast<std::size_t>(slots), true),
      rng_(rng) {}

std::vector<std::int64_t> SimNetwork::Route(int from, int to, std::int64_t now) {
  const LinkState& l = link(from, to);
  if (l.cut || rng_.Chance(l.drop)) {
    ++dropped;
    return {};
  }
  std::vector<std::int64_t> times{now + rng_.Range(l.delay_min_us, l.delay_max_us)};
  if (rng_.Chance(l.duplicate)) {
    ++duplicated;
    times.push_back(now + rng_.Range(l.delay_min_us, l.delay_max_us));
  }
  delivered += times.size();
  return times;
}

void SimNetwork::CutBetween(const std::vector<int>& a, const std::vector<int>& b) {
  for (int x : a) {
    for (int y : b) {
      link(x, y).cut = true;
      link(y, x).cut = true;
    }
  }
}

void SimNetwork::HealAll() {
  for (LinkState& l : links_) l = base_;
  for (std::size_t i = 0; i < client_reachable_.size(); ++i) client_reachable_[i] = true;
}

void SimNetwork::HealCuts() {
  for (LinkState& l : links_) l.cut = false;
  for (std::size_t i = 0; i < client_reachable_.size(); ++i) client_reachable_[i] = true;
}

}  // namespace epoch::sim
