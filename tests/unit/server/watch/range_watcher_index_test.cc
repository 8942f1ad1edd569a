// RangeWatcherIndex: a key finds exactly the range watchers whose range contains it — checked
// against the flat list the index replaced, over random ranges (bounded, from-key, equal, nested,
// with filters), keys at and around every boundary, and interleaved removals.
// EPOCH_WATCH_SEED=<n> reruns one seed.
#include "epoch/watch/range_watcher_index.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "epoch/watch/watch_session.h"

namespace epoch::server {
namespace {

using WatcherPtr = std::shared_ptr<Watcher>;

WatcherPtr MakeWatcher(std::int64_t id, std::string key, std::string end, bool from_key,
                       bool no_put = false, bool no_delete = false) {
  WatchSpec spec;
  spec.key = std::move(key);
  spec.range_end = std::move(end);
  spec.from_key = from_key;
  spec.no_put = no_put;
  spec.no_delete = no_delete;
  return std::make_shared<Watcher>(std::weak_ptr<WatchSession>(), id, spec);
}

mvccpb::Event MakeEvent(const std::string& key, mvccpb::Event::EventType type) {
  mvccpb::Event e;
  e.set_type(type);
  e.mutable_kv()->set_key(key);
  return e;
}

std::set<std::int64_t> IndexAnswer(const RangeWatcherIndex& index, const mvccpb::Event& event) {
  std::set<std::int64_t> ids;
  index.ForEachGroupCovering(event.kv().key(), [&](const RangeWatcherIndex::Group& g) {
    for (const WatcherPtr& w : g.watchers) {
      CHECK(w->spec.Covers(event.kv().key()));
      if (w->spec.WantsType(event.type())) ids.insert(w->id);
    }
    return true;
  });
  return ids;
}

std::set<std::int64_t> FlatAnswer(const std::vector<WatcherPtr>& flat, const mvccpb::Event& event) {
  std::set<std::int64_t> ids;
  for (const WatcherPtr& w : flat) {
    if (w->spec.Wants(event)) ids.insert(w->id);
  }
  return ids;
}

// Short keys over a small alphabet, so ranges overlap, nest and coincide often.
std::string RandomKey(std::mt19937_64& rng) {
  static const char kAlphabet[] = {'\0', 'a', 'b', 'c', 'd', '\xff'};
  std::string key(1 + rng() % 3, 'a');
  for (char& c : key) c = kAlphabet[rng() % sizeof(kAlphabet)];
  return key;
}

TEST_CASE("range index: a key finds exactly the watchers whose range contains it",
          "[watch][range_index]") {
  const char* env = std::getenv("EPOCH_WATCH_SEED");
  const std::uint64_t first = env != nullptr ? std::strtoull(env, nullptr, 10) : 1;
  const std::uint64_t seeds = env != nullptr ? 1 : 40;
  for (std::uint64_t seed = first; seed < first + seeds; ++seed) {
    INFO("reproduce: EPOCH_WATCH_SEED=" << seed << " watch_tests '[range_index]'");
    std::mt19937_64 rng(seed);
    RangeWatcherIndex index;
    std::vector<WatcherPtr> flat;
    std::vector<std::string> boundaries;
    std::int64_t next_id = 0;
    for (int step = 0; step < 600; ++step) {
      const auto roll = rng() % 10;
      if (roll < 5 || flat.empty()) {
        std::string a = RandomKey(rng);
        std::string b = RandomKey(rng);
        if (b < a) std::swap(a, b);
        const bool from_key = rng() % 5 == 0;
        if (!from_key && a == b) b.push_back('a');  // a create with an empty range is refused
        WatcherPtr w =
            MakeWatcher(next_id++, a, from_key ? "" : b, from_key, rng() % 4 == 0, rng() % 4 == 0);
        index.Add(w);
        flat.push_back(w);
        boundaries.push_back(a);
        boundaries.push_back(b);
        if (rng() % 3 == 0) {  // an equal range: the same group
          WatcherPtr twin = MakeWatcher(next_id++, w->spec.key, w->spec.range_end, from_key);
          index.Add(twin);
          flat.push_back(twin);
        }
      } else if (roll < 8) {
        const std::size_t i = rng() % flat.size();
        CHECK(index.Remove(flat[i]));
        CHECK_FALSE(index.Remove(flat[i]));
        flat.erase(flat.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        std::string key = rng() % 2 == 0 ? RandomKey(rng) : boundaries[rng() % boundaries.size()];
        if (rng() % 3 == 0) key.push_back('\0');  // just after a boundary
        const auto type = rng() % 2 == 0 ? mvccpb::Event::PUT : mvccpb::Event::DELETE;
        const mvccpb::Event event = MakeEvent(key, type);
        const std::set<std::int64_t> want = FlatAnswer(flat, event);
        CHECK(IndexAnswer(index, event) == want);
        CHECK(index.AnyWants(event) == !want.empty());
      }
      REQUIRE(index.watchers() == flat.size());
    }
    std::size_t visited = 0;
    index.ForEachWatcher([&](const WatcherPtr&) { ++visited; });
    CHECK(visited == flat.size());
    for (const WatcherPtr& w : flat) CHECK(index.Remove(w));
    CHECK(index.watchers() == 0);
    CHECK(index.ranges() == 0);
  }
}

TEST_CASE("range index: watchers of one range share one group", "[watch][range_index]") {
  RangeWatcherIndex index;
  std::vector<WatcherPtr> ws;
  for (int i = 0; i < 1000; ++i) {
    ws.push_back(MakeWatcher(i, "p/", "p0", false));
    index.Add(ws.back());
  }
  ws.push_back(MakeWatcher(1000, "p/", "", true));  // from-key: a range of its own
  index.Add(ws.back());
  CHECK(index.ranges() == 2);
  int groups = 0;
  index.ForEachGroupCovering("p/x", [&](const RangeWatcherIndex::Group&) {
    ++groups;
    return true;
  });
  CHECK(groups == 2);
  CHECK(IndexAnswer(index, MakeEvent("q", mvccpb::Event::PUT)) == std::set<std::int64_t>{1000});
  CHECK_FALSE(index.AnyWants(MakeEvent("p", mvccpb::Event::PUT)));
  for (int i = 0; i < 1000; ++i) CHECK(index.Remove(ws[i]));
  CHECK(index.ranges() == 1);
}

TEST_CASE("range index: filters counted per group", "[watch][range_index]") {
  RangeWatcherIndex index;
  WatcherPtr no_put = MakeWatcher(1, "a", "c", false, /*no_put=*/true);
  index.Add(no_put);
  CHECK_FALSE(index.AnyWants(MakeEvent("b", mvccpb::Event::PUT)));
  CHECK(index.AnyWants(MakeEvent("b", mvccpb::Event::DELETE)));
  WatcherPtr all = MakeWatcher(2, "a", "c", false);
  index.Add(all);
  CHECK(index.AnyWants(MakeEvent("b", mvccpb::Event::PUT)));
  CHECK(index.Remove(all));
  CHECK_FALSE(index.AnyWants(MakeEvent("b", mvccpb::Event::PUT)));
}

}  // namespace
}  // namespace epoch::server
