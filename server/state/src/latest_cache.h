// LatestCache: the applier's copy of the metadata of recently written keys' latest versions —
// create and mod revision, version, lease: what the latest table's record says, without the
// value. A put that needs nothing more of the previous version (no prev_kv or ignore_value —
// ignore_lease needs only the lease — and no watcher that wants previous values) takes it from
// here instead of reading the latest table: one memtable search and one KeyValue parse fewer per
// put, on every member (bench/kv/PROFILE.md: the read was 8-9 % of each member's CPU in put-256).
//
// Invariant: a live entry is present only if it equals the metadata of the key's record in the
// latest table as the pending write batch sees it. So:
//   - every writer of the latest table (WriteTxn) records the new metadata or erases the key;
//   - an entry whose writes are rolled back clears the cache if it wrote any key (RollbackEntry:
//     rare — request errors are found before the first write — so no journal of keys is kept);
//   - a batch that fails, and a whole-state replacement (snapshot install), clear the cache.
// Absent keys are never cached: a miss reads the table, which also tells "no such key".
//
// Bounded at max_keys entries and max_key_bytes of keys, least recently written out first.
// Every call is O(1) on the applier's thread, which is the Raft strand: a step that scales with
// the cache's size there stalls heartbeats and append responses on every member at once (the
// members apply the same entries at about the same time), long enough for the leader's check
// quorum to step down. So:
//   - the hash table's buckets are allocated for max_keys up front and never rehashed;
//   - a put past a bound evicts at most two of the oldest entries, and a key they do not make
//     room for is left out (never caching a key is always correct);
//   - Clear() only starts a new generation: older entries read as misses and are evicted first
//     (they are the least recently written), never freed all in one call.
// Memory: about 130 bytes per key (map node and LRU links; keys longer than 15 bytes on top),
// about 35 MB at the default 256 Ki keys, plus 2.8 MB of buckets from the start.
//
// Thread-safety: applier thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace epoch::server {

class LatestCache {
 public:
  struct Entry {
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0;
  };

  static constexpr std::size_t kDefaultMaxKeys = 256u << 10;
  static constexpr std::size_t kDefaultMaxKeyBytes = 32u << 20;

  explicit LatestCache(std::size_t max_keys = kDefaultMaxKeys,
                       std::size_t max_key_bytes = kDefaultMaxKeyBytes);
  ~LatestCache();
  LatestCache(const LatestCache&) = delete;
  LatestCache& operator=(const LatestCache&) = delete;

  // nullptr on a miss. Valid until the next non-const call.
  [[nodiscard]] const Entry* Find(std::string_view key) const;
  // The key's latest version is now `entry` (a write of the current log entry).
  void Put(std::string_view key, const Entry& entry);
  // The key has no live version now (a delete of the current log entry).
  void Erase(std::string_view key);

  // The current log entry's writes are kept.
  void CommitEntry() { entry_wrote_ = false; }
  // The current log entry's writes were rolled back: forget what it wrote.
  void RollbackEntry() {
    if (entry_wrote_) Clear();
  }
  // Forgets every entry, in O(1).
  void Clear();

  // Entries that Find can return.
  [[nodiscard]] std::size_t size() const { return live_; }
  // Entries held, forgotten ones included (at most max_keys).
  [[nodiscard]] std::size_t held() const { return entries_.size(); }
  // The hash table's bucket count: fixed at construction.
  [[nodiscard]] std::size_t bucket_count() const { return entries_.bucket_count(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Node;
  using Map = std::unordered_map<std::string, Node, Hash, std::equal_to<>>;
  using Item = Map::value_type;  // its address is stable until it is erased
  // The map's value: the metadata, its generation, and the recency list (oldest to newest)
  // threaded through the items.
  struct Node {
    Entry entry;
    std::uint64_t generation = 0;
    Item* older = nullptr;
    Item* newer = nullptr;
  };

  [[nodiscard]] bool Live(const Node& node) const { return node.generation == generation_; }
  void Unlink(Item* item);
  void LinkNewest(Item* item);
  void Remove(Map::iterator it);
  // Whether a new key of `key_bytes` fits under both bounds.
  [[nodiscard]] bool Fits(std::size_t key_bytes) const {
    return entries_.size() < max_keys_ && key_bytes_ + key_bytes <= max_key_bytes_;
  }

  static constexpr int kMaxEvictionsPerPut = 2;

  const std::size_t max_keys_;
  const std::size_t max_key_bytes_;
  Map entries_;
  Item* oldest_ = nullptr;
  Item* newest_ = nullptr;
  std::size_t key_bytes_ = 0;     // over every held entry
  std::size_t live_ = 0;          // held entries of the current generation
  std::uint64_t generation_ = 0;  // Clear() moves it on
  // Whether the current log entry wrote any key (until CommitEntry / RollbackEntry).
  bool entry_wrote_ = false;
};

}  // namespace epoch::server
