// StoreReader: the read side of KvStore's tables, over either a RocksDB snapshot (readers on any
// thread) or the applier's pending write batch on top of the database (so a txn sees its own
// writes, and entry N+1 of a batch sees entry N). Iterators are bounded to one stored interval.
//
// Thread-safety: a StoreReader is used by one thread at a time; several readers over snapshots of
// the same DB may run concurrently.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/utilities/write_batch_with_index.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "epoch/status.h"
#include "key_encoding.h"

namespace epoch::server {

class KeyIndex;

// Maps a RocksDB status to ours: corruption stays corruption, everything else is an I/O error.
Status FromRocks(const rocksdb::Status& s, std::string_view what);
// Storage failures (the node must stop) as opposed to request errors.
bool IsStorageError(const Status& s);

// Iterates stored keys in [lower, upper), forward or backward.
class BoundedIterator {
 public:
  BoundedIterator(std::unique_ptr<rocksdb::Iterator> it, StoredBounds bounds);

  void SeekToFirst() { it_->Seek(bounds_.lower); }
  void Seek(std::string_view target) { it_->Seek(rocksdb::Slice(target.data(), target.size())); }
  // Positions at the last key <= target.
  void SeekForPrev(std::string_view target) {
    it_->SeekForPrev(rocksdb::Slice(target.data(), target.size()));
  }
  [[nodiscard]] bool Valid() const;
  void Next() { it_->Next(); }
  void Prev() { it_->Prev(); }
  [[nodiscard]] std::string_view key() const;
  [[nodiscard]] std::string_view value() const;
  [[nodiscard]] Status status() const;

 private:
  std::unique_ptr<rocksdb::Iterator> it_;
  StoredBounds bounds_;
};

// The store's two RocksDB column families. Revision records ('r') have one of their own: their
// keys only ever grow, so its flushed files never overlap and RocksDB moves them down the levels
// without rewriting them. Kept with the other tables, the history was rewritten by every L0 → L1
// compaction (bench/kv/PROFILE.md). Writes and reads pick the family by the key's table.
struct StoreFamilies {
  rocksdb::ColumnFamilyHandle* main = nullptr;     // every table but 'r'
  rocksdb::ColumnFamilyHandle* history = nullptr;  // 'r'

  [[nodiscard]] rocksdb::ColumnFamilyHandle* For(std::string_view stored_key) const {
    return !stored_key.empty() && stored_key[0] == kRevisionTable ? history : main;
  }
};

class StoreReader {
 public:
  // `snapshot` may be null (read the latest state); `pending` may be null (no pending writes).
  // `index`: the store's per-key history (published entries only, whatever `pending` holds).
  StoreReader(rocksdb::DB* db, StoreFamilies families, const rocksdb::Snapshot* snapshot,
              rocksdb::WriteBatchWithIndex* pending, const KeyIndex* index);

  Result<std::optional<std::string>> Get(std::string_view key) const;
  // `bounds` lie within one table (the family is chosen by bounds.lower), or are the whole key
  // space of one family (lower empty: the main family).
  [[nodiscard]] BoundedIterator NewIterator(StoredBounds bounds) const;
  [[nodiscard]] const StoreFamilies& families() const { return families_; }
  [[nodiscard]] const KeyIndex& index() const { return *index_; }

 private:
  rocksdb::DB* db_;
  StoreFamilies families_;
  const rocksdb::Snapshot* snapshot_;
  rocksdb::WriteBatchWithIndex* pending_;
  const KeyIndex* index_;
};

}  // namespace epoch::server
