// KvStore::ReadState: one consistent view for a reader — a RocksDB snapshot and the store meta
// (revision, compact revision, ...) of exactly the write batch that snapshot ends with. Taken
// under KvStore::mu_, released (snapshot freed) when destroyed.
//
// Thread-safety: owned by one reader thread.
#pragma once

#include <rocksdb/db.h>

#include "epoch/state/kv_store.h"
#include "range_query.h"
#include "store_reader.h"

namespace epoch::server {

class KvStore::ReadState {
 public:
  ReadState(rocksdb::DB* db, StoreFamilies families, const KeyIndex* index,
            const KvStore::Meta& meta)
      : db_(db),
        snapshot_(db->GetSnapshot()),
        meta_(meta),
        reader_(db, families, snapshot_, nullptr, index) {}
  ~ReadState() { db_->ReleaseSnapshot(snapshot_); }
  ReadState(const ReadState&) = delete;
  ReadState& operator=(const ReadState&) = delete;

  [[nodiscard]] const StoreReader& reader() const { return reader_; }
  [[nodiscard]] const KvStore::Meta& meta() const { return meta_; }
  [[nodiscard]] ReadContext context() const {
    return ReadContext{&reader_, meta_.revision, meta_.compact_revision};
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
  KvStore::Meta meta_;
  StoreReader reader_;
};

}  // namespace epoch::server
