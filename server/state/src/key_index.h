// KeyIndex: every key's revisions (puts and tombstones) since the compact revision, in memory —
// etcd's treeIndex. A read at an explicit revision, a watch's prev_kv from history and Compact
// ask it which revision record ('r') holds a key's value as of a revision.
//
// Why in memory: kept in RocksDB (format 2's `i` table) each put wrote a third record on every
// member, and every L0 → L1 compaction of the main column family rewrote all of them — about
// 10 % of a put's server CPU in put-256 (bench/kv/PROFILE.md). The cost moves to
// startup: KvStore rebuilds the index from the revision records when it opens a store or
// installs a snapshot (one sequential scan of the history family).
//
// Memory: ~100 bytes per key (map node, key up to 15 bytes inline, vector) plus longer keys, and
// 16 bytes per revision (up to twice that in vector capacity), until compaction removes what is
// superseded: as etcd's, the index grows with an uncompacted history.
//
// Staging: the applier's writes are staged (Stage, StageCompaction) while their RocksDB batch is
// built, rolled back with the entry that made them (BeginEntry / RollbackEntry), and become
// visible in Publish, which KvStore calls after the batch is written and before the batch's
// revision is published to readers. Staged changes are invisible to every reader, including the
// applier's own reads (as the `i` records were: entries that read history start from a written
// batch, see ReadsHistory in entry_apply.h).
//
// Compaction is logical first, physical later (compaction.h). Publishing a staged compaction to C
// only raises the compact revision: O(1) on the applier. The entries it supersedes are removed
// afterwards by the store's compactor (CompactSome, a bounded batch per call under the exclusive
// lock). Until then they are leftovers, and every answer is what it would be without them:
// readers at revision R see every entry with main <= R (they all are published once R is) and
// ignore later ones; R >= C finds the same last entry with or without leftovers; below C, LiveAt
// is etcd's "compacted" and LastAt answers only with an entry the compaction keeps. A reader's
// RocksDB snapshot may still hold records the index no longer names; the index never names a
// record the compactor may delete to a reader that is not refused.
//
// Thread-safety: Stage*, BeginEntry, RollbackEntry, DiscardStaged, Publish, Replace: the applier
// thread. CompactSome: the compactor, one call at a time, never during Replace. LiveAt, LastAt,
// stats: any thread (a shared lock; Publish, Replace and CompactSome take it exclusively).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "key_encoding.h"
#include "revision_codec.h"

namespace epoch::server {

class KeyIndex {
 public:
  // One revision of a key: a put (the record holds the value) or a tombstone.
  struct Entry {
    std::int64_t main = 0;
    std::uint32_t sub = 0;
    bool put = false;
    [[nodiscard]] RevisionPair rev() const { return RevisionPair{main, sub}; }
  };
  // One key's entries, ascending.
  using History = std::vector<Entry>;
  // Every key's entries, in key order.
  using Map = std::map<std::string, History, std::less<>>;

  struct Stats {
    std::size_t keys = 0;
    std::size_t entries = 0;
    std::size_t live_keys = 0;  // keys whose last entry is a put (not deleted)
  };

  // --- applier thread ---------------------------------------------------------------------

  // A write of the batch being built. InvalidArgument if the sub-revision does not fit (more
  // than 4 Gi writes in one revision).
  Status Stage(std::string_view key, RevisionPair rev, bool put);
  // A compaction to `compact_to` in the batch being built: Publish raises the compact revision.
  // What it supersedes — for each key, the entries at or below it except the last one if that is
  // a put or at `compact_to` itself — is removed later by CompactSome.
  void StageCompaction(Revision compact_to);
  // Marks the start of a log entry's writes; RollbackEntry drops what was staged since.
  void BeginEntry() { entry_mark_ = staged_.size(); }
  void RollbackEntry() { staged_.resize(entry_mark_); }
  // The batch was not written: drop everything staged.
  void DiscardStaged();
  // The batch holding everything staged is written: apply it, in order.
  void Publish();
  // Replaces the whole index (a store opened or a snapshot installed); drops anything staged.
  void Replace(Map keys, Revision compact_revision);

  // --- any thread -------------------------------------------------------------------------

  // For each key in `range`, in key order, its last entry with main <= rev if that is a put:
  // `visit(key, rev)` returning false stops the scan. etcd's "compacted" error if rev is below
  // the index's compact revision. The visitor runs under the shared lock: it must not block.
  Status LiveAt(const KeyRange& range, Revision rev,
                const std::function<bool(const std::string&, RevisionPair)>& visit) const;
  // The key's last entry with main <= rev, if any (a tombstone included). Below the compact
  // revision, only an entry the compaction keeps: what a fully compacted index would answer.
  [[nodiscard]] std::optional<Entry> LastAt(std::string_view key, Revision rev) const;
  // Entries the compactor has not removed yet are counted (leftovers of a compaction).
  [[nodiscard]] Stats stats() const;
  [[nodiscard]] Revision compact_revision() const;

  // --- the compactor ----------------------------------------------------------------------

  // Removes up to `max_entries` of the entries a compaction to `compact_to` (at most the compact
  // revision) supersedes, from the keys at or after `from` in key order, and appends their
  // revisions (the records to delete) to `removed`. Visits at most 8 * max_entries keys, so
  // one call holds the exclusive lock for a bounded time. Returns the key to continue from, or
  // nullopt when no key at or after `from` has anything left to remove.
  std::optional<std::string> CompactSome(std::string_view from, Revision compact_to,
                                         std::size_t max_entries,
                                         std::vector<RevisionPair>* removed);

 private:
  struct Staged {
    std::string key;  // empty for a compaction
    Entry entry;      // entry.main = compact_to for a compaction
    bool compaction = false;
  };
  // How many of `h`'s first entries a compaction to `compact_to` removes.
  static std::size_t RemovedByCompaction(const History& h, std::int64_t compact_to);

  mutable std::shared_mutex mu_;
  Map keys_;
  // The logical compact revision: raised when a staged compaction is published.
  Revision compact_revision_{-1};
  std::size_t entries_ = 0;
  std::size_t live_keys_ = 0;  // keys whose history ends with a put; compaction keeps that entry
  // Applier thread only.
  std::vector<Staged> staged_;
  std::size_t entry_mark_ = 0;
};

}  // namespace epoch::server
