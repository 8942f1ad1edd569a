// The applier's cache of keys' latest metadata (src/latest_cache.h) must change nothing but the
// previous values left out of PUT events: a store with KvStoreOptions::lazy_prev_values and one
// without, fed the same log in random batches, give the same responses, revisions, events (but
// for those prev_kv) and state — through deletes, lease revokes, ignore_lease puts, compactions
// and a snapshot install that replaces the whole state.
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "latest_cache.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

KvStoreOptions Lazy() {
  KvStoreOptions o;
  o.lazy_prev_values = true;
  return o;
}

v1::InternalRequest RandomRequest(std::mt19937* rng, int i) {
  auto pick = [rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(*rng); };
  auto key = [&] { return std::string(1, static_cast<char>('a' + pick(0, 5))); };
  v1::InternalRequest req;
  req.set_cluster_time_ms(1);
  const int kind = pick(0, 19);
  if (kind <= 9) {
    pb::PutRequest& p = *req.mutable_put();
    p = PutReq(key(), "v" + std::to_string(i), pick(0, 3) == 0 ? 7 : 0);
    p.set_prev_kv(pick(0, 3) == 0);
    p.set_ignore_lease(pick(0, 5) == 0);  // takes the lease from the cached metadata
    if (p.ignore_lease()) p.set_lease(0);
  } else if (kind <= 11) {
    req.mutable_delete_range()->set_key(key());
    if (pick(0, 2) == 0) req.mutable_delete_range()->set_range_end("z");
  } else if (kind <= 14) {
    pb::TxnRequest& t = *req.mutable_txn();
    *t.add_compare() = Cmp(key(), pb::Compare::VERSION, pb::Compare::GREATER);
    *t.add_success()->mutable_request_put() = PutReq(key(), "t" + std::to_string(i));
    *t.add_failure()->mutable_request_put() = PutReq(key(), "f" + std::to_string(i));
  } else if (kind == 15) {
    req.mutable_lease_grant()->set_id(7);
    req.mutable_lease_grant()->set_ttl_ms(60'000);
  } else if (kind == 16) {
    req.mutable_lease_revoke()->set_id(7);  // deletes every key attached to it
  } else if (kind == 17) {
    req.mutable_compaction()->set_revision(std::max(1, i / 2));
  } else {
    *req.mutable_put() = PutReq("new" + std::to_string(i), "x");  // a key never seen before
  }
  return req;
}

// Same outcome; the lazy store's PUT events may lack prev_kv, and a prev_kv it has is the same.
// Returns how many PUT events lacked it.
int CheckSameOutcome(const ApplyResult& eager, const ApplyResult& lazy, std::size_t i) {
  INFO("entry " << i);
  CHECK(eager.status.ToString() == lazy.status.ToString());
  CHECK(eager.revision == lazy.revision);
  CHECK(eager.response.SerializeAsString() == lazy.response.SerializeAsString());
  REQUIRE(eager.events.size() == lazy.events.size());
  int lacking = 0;
  for (std::size_t e = 0; e < eager.events.size(); ++e) {
    const mvccpb::Event& a = eager.events[e];
    const mvccpb::Event& b = lazy.events[e];
    CHECK(a.type() == b.type());
    CHECK(a.kv().SerializeAsString() == b.kv().SerializeAsString());
    if (b.has_prev_kv()) {
      CHECK(a.prev_kv().SerializeAsString() == b.prev_kv().SerializeAsString());
    } else {
      CHECK(b.type() == mvccpb::Event::PUT);
      if (a.has_prev_kv()) ++lacking;
    }
  }
  return lacking;
}

TEST_CASE("lazy previous values change nothing but the prev_kv left out of PUT events",
          "[server][latest_cache]") {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    TempDir d1;
    TempDir d2;
    TestStore eager(d1.path());
    TestStore lazy(d2.path(), Lazy());
    int lacking = 0;
    int index = 1;
    bool readers = false;
    while (index <= 400) {
      // Now and then a watcher wants previous values: from the next batch on, none is left out.
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) {
        lazy->AddPrevValueReaders(readers ? -1 : 1);
        readers = !readers;
      }
      const int n = std::uniform_int_distribution<int>(1, 16)(rng);
      std::vector<v1::InternalRequest> log;
      for (int k = 0; k < n; ++k) log.push_back(RandomRequest(&rng, index + k));
      std::vector<ApplyInput> inputs;
      for (int k = 0; k < n; ++k) inputs.push_back(ApplyInput{LogIndex(index + k), &log[k]});
      Result<std::vector<ApplyResult>> a = eager->ApplyBatch(inputs);
      Result<std::vector<ApplyResult>> b = lazy->ApplyBatch(inputs);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      for (int k = 0; k < n; ++k) {
        const int l = CheckSameOutcome((*a)[k], (*b)[k], index + k);
        if (readers) CHECK(l == 0);
        lacking += l;
      }
      index += n;
    }
    CHECK(lacking > 0);  // the cache was used
    CHECK(*lazy->StateHash() == *eager->StateHash());
    lazy.Reopen();  // a new applier starts with an empty cache
    CHECK(*lazy->StateHash() == *eager->StateHash());
  }
}

TEST_CASE("without lazy_prev_values every PUT event carries its previous value",
          "[server][latest_cache]") {
  TempDir d;
  TestStore store(d.path());
  store.Put("k", "v1");
  ApplyResult r = store.Put("k", "v2");
  REQUIRE(r.events.size() == 1);
  REQUIRE(r.events[0].has_prev_kv());
  CHECK(r.events[0].prev_kv().value() == "v1");
}

TEST_CASE("a snapshot install replaces what the cache described", "[server][latest_cache]") {
  TempDir d1;
  TempDir d2;
  TempDir images;
  TestStore lazy(d1.path(), Lazy());
  TestStore other(d2.path());
  lazy.Put("k", "mine");
  lazy.Put("k", "mine again");  // cached: version 2, create revision 2
  for (int i = 0; i < 5; ++i) other.Put("pad" + std::to_string(i), "x");
  other.Put("k", "theirs");  // version 1, create revision 7
  for (int i = 0; i < 5; ++i) other.Put("pad" + std::to_string(i), "y");
  const std::string image = images.path() + "/image";
  REQUIRE(other->CreateCheckpoint(image).ok());
  REQUIRE(lazy->ReplaceWithCheckpoint(image).ok());

  v1::InternalRequest put;
  *put.mutable_put() = PutReq("k", "after");
  put.set_cluster_time_ms(1);
  Result<ApplyResult> mine = lazy->Apply(other->AppliedIndex().Next(), put);
  Result<ApplyResult> theirs = other->Apply(other->AppliedIndex().Next(), put);
  REQUIRE(mine.ok());
  REQUIRE(theirs.ok());
  REQUIRE(mine->events.size() == 1);
  CHECK(mine->events[0].kv().version() == 2);
  CHECK(mine->events[0].kv().create_revision() == 7);
  CHECK(mine->events[0].kv().SerializeAsString() == theirs->events[0].kv().SerializeAsString());
  CHECK(*lazy->StateHash() == *other->StateHash());
}

TEST_CASE("LatestCache: rollback forgets what the entry wrote", "[server][latest_cache]") {
  LatestCache cache(/*max_keys=*/3);
  cache.Put("a", {1, 1, 1, 0});
  cache.CommitEntry();
  cache.Put("b", {2, 2, 1, 0});
  cache.RollbackEntry();
  CHECK(cache.Find("a") == nullptr);  // the whole cache: no journal of keys is kept
  CHECK(cache.Find("b") == nullptr);
  CHECK(cache.size() == 0);

  cache.Put("a", {1, 1, 1, 0});
  cache.CommitEntry();
  cache.RollbackEntry();  // an entry that wrote nothing leaves the cache alone
  REQUIRE(cache.Find("a") != nullptr);
  CHECK(cache.Find("a")->version == 1);

  cache.Put("a", {1, 3, 2, 5});  // an update
  CHECK(cache.Find("a")->mod_revision == 3);
  CHECK(cache.Find("a")->lease == 5);
  cache.Erase("a");
  CHECK(cache.Find("a") == nullptr);
}

// A full cache drops its least recently written key for a new one. Clearing the whole cache
// there would free 256 Ki entries in one apply, on every member at about the same log index: a
// stall of the Raft strand on all three members at once, long enough (0.6-0.7 s on a busy 2-core
// machine) for followers to time out and the leader's check quorum to step down.
TEST_CASE("LatestCache: a full cache evicts the least recently written key, not everything",
          "[server][latest_cache]") {
  LatestCache cache(/*max_keys=*/3);
  cache.Put("x", {1, 1, 1, 0});
  cache.Put("y", {2, 2, 1, 0});
  cache.Put("z", {3, 3, 1, 0});
  cache.Put("w", {4, 4, 1, 0});  // over the bound: x goes
  CHECK(cache.size() == 3);
  CHECK(cache.Find("x") == nullptr);
  CHECK(cache.Find("y") != nullptr);
  CHECK(cache.Find("z") != nullptr);
  CHECK(cache.Find("w") != nullptr);

  cache.Put("y", {2, 5, 2, 0});  // rewritten: now the newest
  cache.Put("v", {6, 6, 1, 0});  // z is the oldest
  CHECK(cache.Find("z") == nullptr);
  REQUIRE(cache.Find("y") != nullptr);
  CHECK(cache.Find("y")->mod_revision == 5);
  CHECK(cache.Find("w") != nullptr);
  CHECK(cache.Find("v") != nullptr);
}

// Each rehash of a growing hash table moves every entry in one apply (0.1-0.4 s at 85 Ki and
// 173 Ki keys on a busy 2-core machine): the buckets are sized once, up front.
TEST_CASE("LatestCache: the hash table is never rehashed as it fills", "[server][latest_cache]") {
  constexpr std::size_t kMax = 5000;
  LatestCache cache(kMax);
  const std::size_t buckets = cache.bucket_count();
  CHECK(buckets >= kMax);
  for (std::size_t i = 0; i < 3 * kMax; ++i) {
    cache.Put("scale/k/" + std::to_string(i), {1, 1, 1, 0});
    if (i % 7 == 0) cache.Erase("scale/k/" + std::to_string(i / 2));
    if (i == kMax + 17) cache.Clear();
  }
  CHECK(cache.held() <= kMax);
  CHECK(cache.bucket_count() == buckets);
}

TEST_CASE("LatestCache: clearing forgets every entry at once and frees them a put at a time",
          "[server][latest_cache]") {
  constexpr std::size_t kMax = 100;
  LatestCache cache(kMax);
  for (std::size_t i = 0; i < kMax; ++i) cache.Put("k" + std::to_string(i), {1, 1, 1, 0});
  cache.Put("k7", {1, 2, 2, 0});
  cache.Clear();
  CHECK(cache.size() == 0);
  CHECK(cache.held() == kMax);  // nothing freed by Clear itself
  for (std::size_t i = 0; i < kMax; ++i) CHECK(cache.Find("k" + std::to_string(i)) == nullptr);

  cache.Put("k7", {1, 3, 3, 0});  // a forgotten key written again is live again
  REQUIRE(cache.Find("k7") != nullptr);
  CHECK(cache.Find("k7")->version == 3);
  CHECK(cache.size() == 1);
  for (std::size_t i = 0; i < 10; ++i) {
    const std::size_t held = cache.held();
    cache.Put("new" + std::to_string(i), {1, 1, 1, 0});  // evicts one forgotten entry
    CHECK(cache.held() == held);
  }
  CHECK(cache.size() == 11);
  CHECK(cache.Find("k7") != nullptr);  // written after the clear: not among the oldest
}

TEST_CASE(
    "LatestCache: a put evicts at most two entries; a key they do not make room for is "
    "left out",
    "[server][latest_cache]") {
  LatestCache cache(/*max_keys=*/1000, /*max_key_bytes=*/100);
  for (int i = 0; i < 100; ++i) cache.Put(std::string(1, static_cast<char>(i)), {1, 1, 1, 0});
  CHECK(cache.held() == 100);
  const std::string big(50, 'b');
  cache.Put(big, {1, 1, 1, 0});
  CHECK(cache.Find(big) == nullptr);
  CHECK(cache.held() == 98);
  cache.Put(std::string(1000, 'h'), {1, 1, 1, 0});  // larger than the bound: never cached
  CHECK(cache.held() == 96);
  cache.Put("z", {1, 1, 1, 0});
  CHECK(cache.Find("z") != nullptr);
}

// What the applier relies on: Find returns nothing or the metadata of the key's last Put, never
// one superseded by a later Put, Erase or Clear; and the bounds hold.
TEST_CASE("LatestCache: random operations against a model", "[server][latest_cache]") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    INFO("seed " << seed);
    std::mt19937 rng(seed);
    auto pick = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const std::size_t max_keys = static_cast<std::size_t>(pick(1, 20));
    const std::size_t max_key_bytes = static_cast<std::size_t>(pick(1, 60));
    LatestCache cache(max_keys, max_key_bytes);
    std::map<std::string, std::int64_t> model;  // the key's last written mod revision
    for (std::int64_t op = 1; op <= 3000; ++op) {
      const std::string key(static_cast<std::size_t>(pick(1, 4)),
                            static_cast<char>('a' + pick(0, 7)));
      const int kind = pick(0, 99);
      if (kind < 60) {
        cache.Put(key, {1, op, 1, 0});
        model[key] = op;
      } else if (kind < 80) {
        cache.Erase(key);
        model.erase(key);
      } else if (kind < 82) {
        cache.Clear();
        model.clear();
      } else {
        const LatestCache::Entry* e = cache.Find(key);
        if (e != nullptr) {
          auto it = model.find(key);
          REQUIRE(it != model.end());
          CHECK(e->mod_revision == it->second);
        }
      }
      REQUIRE(cache.held() <= max_keys);
      REQUIRE(cache.size() <= cache.held());
    }
  }
}

}  // namespace
}  // namespace epoch::server
