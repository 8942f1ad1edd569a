// KeyIndex: staging and publication, rollback, the compaction rule, and what readers at a
// revision see (src/key_index.h).
#include "key_index.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "epoch/etcd_errors.h"

namespace epoch::server {
namespace {

// Keys live at `rev` in `range`, as "key@main.sub".
std::vector<std::string> Live(const KeyIndex& index, const KeyRange& range, std::int64_t rev) {
  std::vector<std::string> out;
  Status s = index.LiveAt(range, Revision(rev), [&](const std::string& key, RevisionPair p) {
    out.push_back(key + "@" + std::to_string(p.main) + "." + std::to_string(p.sub));
    return true;
  });
  REQUIRE(s.ok());
  return out;
}

using V = std::vector<std::string>;

TEST_CASE("key index: staged writes are invisible until published", "[server][key_index]") {
  KeyIndex index;
  REQUIRE(index.Stage("a", {2, 0}, true).ok());
  CHECK(Live(index, MakeKeyRange("a", ""), 2).empty());
  CHECK_FALSE(index.LastAt("a", Revision(2)).has_value());
  index.Publish();
  CHECK(Live(index, MakeKeyRange("a", ""), 2) == V{"a@2.0"});
  CHECK(Live(index, MakeKeyRange("a", ""), 1).empty());  // a reader below the write
  CHECK(index.stats().keys == 1);
  CHECK(index.stats().entries == 1);
}

TEST_CASE("key index: live keys count puts and deletes, not revisions or compaction",
          "[server][key_index]") {
  KeyIndex index;
  REQUIRE(index.Stage("a", {2, 0}, true).ok());
  REQUIRE(index.Stage("b", {2, 1}, true).ok());
  REQUIRE(index.Stage("a", {3, 0}, true).ok());  // an update: still one key
  index.Publish();
  CHECK(index.stats().live_keys == 2);
  REQUIRE(index.Stage("a", {4, 0}, false).ok());  // deleted
  REQUIRE(index.Stage("c", {4, 1}, false).ok());  // a delete of a key never put
  index.Publish();
  CHECK(index.stats().live_keys == 1);
  REQUIRE(index.Stage("a", {5, 0}, true).ok());  // put again
  index.Publish();
  CHECK(index.stats().live_keys == 2);
  index.StageCompaction(Revision(5));
  index.Publish();
  CHECK(index.stats().live_keys == 2);
  KeyIndex::Map replaced;
  replaced["x"] = {KeyIndex::Entry{6, 0, true}};
  replaced["y"] = {KeyIndex::Entry{6, 1, true}, KeyIndex::Entry{7, 0, false}};
  index.Replace(std::move(replaced), Revision(1));
  CHECK(index.stats().live_keys == 1);
}

TEST_CASE("key index: a rolled-back entry's writes are dropped, earlier ones kept",
          "[server][key_index]") {
  KeyIndex index;
  index.BeginEntry();
  REQUIRE(index.Stage("a", {2, 0}, true).ok());
  index.BeginEntry();
  REQUIRE(index.Stage("b", {3, 0}, true).ok());
  REQUIRE(index.Stage("c", {3, 1}, true).ok());
  index.RollbackEntry();
  index.Publish();
  CHECK(Live(index, MakeKeyRange("a", "\0"), 10) == V{"a@2.0"});

  // A failed batch: nothing of it.
  REQUIRE(index.Stage("d", {3, 0}, true).ok());
  index.DiscardStaged();
  index.Publish();
  CHECK(Live(index, MakeKeyRange("a", "\0"), 10) == V{"a@2.0"});
}

TEST_CASE("key index: each key's last revision at or below the read, tombstones hide it",
          "[server][key_index]") {
  KeyIndex index;
  REQUIRE(index.Stage("a", {2, 0}, true).ok());
  REQUIRE(index.Stage("b", {3, 0}, true).ok());
  REQUIRE(index.Stage("a", {4, 0}, true).ok());
  REQUIRE(index.Stage("b", {5, 0}, false).ok());  // deleted
  REQUIRE(index.Stage("c", {5, 1}, true).ok());
  index.Publish();
  const KeyRange all = MakeKeyRange("", std::string(1, '\0'));
  CHECK(Live(index, all, 1).empty());
  CHECK(Live(index, all, 3) == V{"a@2.0", "b@3.0"});
  CHECK(Live(index, all, 4) == V{"a@4.0", "b@3.0"});
  CHECK(Live(index, all, 5) == V{"a@4.0", "c@5.1"});
  CHECK(Live(index, MakeKeyRange("b", ""), 4) == V{"b@3.0"});
  CHECK(Live(index, MakeKeyRange("b", ""), 5).empty());
  CHECK(Live(index, MakeKeyRange("a", "c"), 5) == V{"a@4.0"});
  CHECK(Live(index, MakeKeyRange("b", std::string(1, '\0')), 5) == V{"c@5.1"});
  CHECK(Live(index, MakeKeyRange("aa", ""), 5).empty());  // no prefix match for a single key

  const auto tomb = index.LastAt("b", Revision(9));
  REQUIRE(tomb.has_value());
  CHECK_FALSE(tomb->put);
  CHECK(tomb->main == 5);

  // The visitor can stop the scan.
  int seen = 0;
  REQUIRE(index
              .LiveAt(all, Revision(5),
                      [&](const std::string&, RevisionPair) {
                        ++seen;
                        return false;
                      })
              .ok());
  CHECK(seen == 1);
}

TEST_CASE("key index: compaction keeps each key's value as of the compact revision",
          "[server][key_index]") {
  KeyIndex index;
  REQUIRE(index.Stage("a", {2, 0}, true).ok());
  REQUIRE(index.Stage("a", {3, 0}, true).ok());
  REQUIRE(index.Stage("b", {3, 1}, true).ok());
  REQUIRE(index.Stage("b", {4, 0}, false).ok());  // b deleted before the compaction
  REQUIRE(index.Stage("c", {5, 0}, true).ok());
  REQUIRE(index.Stage("c", {6, 0}, false).ok());  // c deleted exactly at it
  REQUIRE(index.Stage("a", {7, 0}, true).ok());
  index.Publish();

  index.StageCompaction(Revision(6));
  REQUIRE(index.Stage("d", {8, 0}, true).ok());  // after the compaction, same batch
  index.Publish();
  CHECK(index.stats().entries == 8);  // publishing removes nothing: the compactor does
  CHECK(index.compact_revision() == Revision(6));
  // Below the compact revision, only what the compaction keeps: a@3 (a's value as of 6), and
  // neither b (deleted at 4) nor c's put at 5 (superseded by its tombstone at 6).
  CHECK(index.LastAt("a", Revision(5))->main == 3);
  CHECK_FALSE(index.LastAt("a", Revision(2)).has_value());
  CHECK_FALSE(index.LastAt("b", Revision(3)).has_value());
  CHECK_FALSE(index.LastAt("c", Revision(5)).has_value());

  // One entry per call: a key's superseded entries may take several.
  std::vector<RevisionPair> removed;
  std::optional<std::string> from = "";
  int calls = 0;
  while (from.has_value()) {
    from = index.CompactSome(*from, Revision(6), 1, &removed);
    ++calls;
    CHECK(index.LastAt("a", Revision(5))->main == 3);  // the same answer all along
    CHECK_FALSE(index.LastAt("c", Revision(5)).has_value());
  }
  CHECK(removed == std::vector<RevisionPair>{{2, 0}, {3, 1}, {4, 0}, {5, 0}});
  CHECK(calls >= 4);

  CHECK(index.stats().entries == 4);  // a@3, a@7, c@6 (tombstone at the revision), d@8
  CHECK(index.stats().keys == 3);     // b is gone
  const KeyRange all = MakeKeyRange("", std::string(1, '\0'));
  CHECK(Live(index, all, 6) == V{"a@3.0"});
  CHECK(Live(index, all, 8) == V{"a@7.0", "d@8.0"});
  // Below the compact revision: etcd's "compacted".
  Status below =
      index.LiveAt(all, Revision(5), [](const std::string&, RevisionPair) { return true; });
  CHECK(below.code() == etcd_errors::kCompacted.ToStatus().code());
  CHECK(below.message() == etcd_errors::kCompacted.ToStatus().message());
}

TEST_CASE("key index: Replace swaps the whole index and drops staged writes",
          "[server][key_index]") {
  KeyIndex index;
  REQUIRE(index.Stage("old", {2, 0}, true).ok());
  index.Publish();
  REQUIRE(index.Stage("staged", {3, 0}, true).ok());
  KeyIndex::Map keys;
  keys["new"].push_back(KeyIndex::Entry{9, 0, true});
  index.Replace(std::move(keys), Revision(8));
  index.Publish();
  CHECK(Live(index, MakeKeyRange("", std::string(1, '\0')), 9) == V{"new@9.0"});
  CHECK_FALSE(index
                  .LiveAt(MakeKeyRange("new", ""), Revision(7),
                          [](const std::string&, RevisionPair) { return true; })
                  .ok());
}

TEST_CASE("key index: a sub-revision past 32 bits is refused", "[server][key_index]") {
  KeyIndex index;
  Status s = index.Stage("a", {2, std::int64_t{1} << 32}, true);
  CHECK(s.code() == StatusCode::kInvalidArgument);
}

TEST_CASE("key index: readers run while the applier publishes and compacts",
          "[server][key_index]") {
  // Under tsan this is the race check; in any build, a reader never sees a key's revision go
  // backwards for a fixed read revision.
  KeyIndex index;
  std::atomic<std::int64_t> published{1};
  std::atomic<bool> stop{false};
  std::atomic<int> violations{0};  // Catch2's assertions are not thread-safe: count, check later
  std::thread reader([&] {
    while (!stop.load()) {
      const std::int64_t rev = published.load();
      std::optional<KeyIndex::Entry> e = index.LastAt("k", Revision(rev));
      if (e && e->main > rev) ++violations;
      (void)index.LiveAt(MakeKeyRange("", std::string(1, '\0')), Revision(rev),
                         [&](const std::string&, RevisionPair p) {
                           if (p.main > rev) ++violations;
                           return true;
                         });
    }
  });
  for (std::int64_t rev = 2; rev < 2000; ++rev) {
    REQUIRE(index.Stage(rev % 3 == 0 ? "k" : "j" + std::to_string(rev % 7), {rev, 0}, true).ok());
    if (rev % 100 == 0) index.StageCompaction(Revision(rev - 50));
    index.Publish();
    if (rev % 100 == 0) {
      std::vector<RevisionPair> removed;
      for (std::optional<std::string> from = ""; from.has_value();) {
        from = index.CompactSome(*from, Revision(rev - 50), 4, &removed);
      }
    }
    published.store(rev);
  }
  stop.store(true);
  reader.join();
  CHECK(violations.load() == 0);
  CHECK(index.stats().entries < 200);
}

}  // namespace
}  // namespace epoch::server
