// LatestCache: the applier's copy of the metadata of recently written keys' latest versions —
// create and mod revision, version, lease: what the latest table's record says, without the
// value. A put that needs nothing more of the previous version (no prev_kv or ignore_value —
// ignore_lease needs only the lease — and no watcher that wants previous values) takes it from
// here instead of reading
// the latest table: one memtable search and one KeyValue parse fewer per put, on every member
// (bench/kv/PROFILE.md: the read was 8-9 % of each member's CPU in put-256).
//
// Invariant: an entry is present only if it equals the metadata of the key's record in the
// latest table as the pending write batch sees it. So:
//   - every writer of the latest table (WriteTxn) records the new metadata or erases the key;
//   - an entry whose writes are rolled back clears the cache if it wrote any key (RollbackEntry:
//     rare — request errors are found before the first write — so no journal of keys is kept);
//   - a batch that fails, and a whole-state replacement (snapshot install), clear the cache.
// Absent keys are never cached: a miss reads the table, which also tells "no such key".
//
// Bounded: past max_keys entries or max_key_bytes of keys it is cleared (it is a cache).
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

  // Worst case about 60 MB: ~100 bytes of map node per key, plus the keys themselves.
  static constexpr std::size_t kDefaultMaxKeys = 256u << 10;
  static constexpr std::size_t kDefaultMaxKeyBytes = 32u << 20;

  explicit LatestCache(std::size_t max_keys = kDefaultMaxKeys,
                       std::size_t max_key_bytes = kDefaultMaxKeyBytes)
      : max_keys_(max_keys), max_key_bytes_(max_key_bytes) {}

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
  void Clear();

  [[nodiscard]] std::size_t size() const { return entries_.size(); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  void Drop(std::string_view key);

  const std::size_t max_keys_;
  const std::size_t max_key_bytes_;
  std::unordered_map<std::string, Entry, Hash, std::equal_to<>> entries_;
  std::size_t key_bytes_ = 0;
  // Whether the current log entry wrote any key (until CommitEntry / RollbackEntry).
  bool entry_wrote_ = false;
};

}  // namespace epoch::server
