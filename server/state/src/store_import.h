// FamilyImport: brings a whole set of stored keys into a KvStore in one atomic, durable step —
// one external SST file per column family, ingested together (IngestExternalFiles). Used to
// install a snapshot image and to migrate a format-1 store's history into its own family. Keys
// are routed to their family by table (StoreFamilies::For), so an image of either format lands
// in the current layout.
//
// An ingested file gets one sequence number for all its entries, and a range deletion in it covers
// only older sequence numbers: a file that starts with a range deletion of a key interval replaces
// that interval's old contents with its own, without holding them in memory.
//
// Thread-safety: one thread; Ingest() is called under the store's reader lock by the caller.
#pragma once

#include <rocksdb/db.h>
#include <rocksdb/sst_file_writer.h>

#include <memory>
#include <string>

#include "epoch/status.h"
#include "store_reader.h"

namespace epoch::server {

class FamilyImport {
 public:
  // Files are written at `path_prefix` + ".main.sst" / ".history.sst".
  FamilyImport(rocksdb::DB* db, StoreFamilies families, std::string path_prefix);
  ~FamilyImport();  // removes the files (an ingest moves them away first)
  FamilyImport(const FamilyImport&) = delete;
  FamilyImport& operator=(const FamilyImport&) = delete;

  // Starts both files; each first deletes its family's keys in [lower, upper) (upper "" = to the
  // end of the key space).
  Status Open(const StoredBounds& replace_main, const StoredBounds& replace_history);
  // Keys of each family in increasing order.
  Status Add(const rocksdb::Slice& key, const rocksdb::Slice& value);
  [[nodiscard]] std::uint64_t history_keys() const { return history_keys_; }
  // Finishes both files and ingests them atomically.
  Status Ingest();

 private:
  struct File {
    std::string path;
    rocksdb::ColumnFamilyHandle* family = nullptr;
    std::unique_ptr<rocksdb::SstFileWriter> writer;
  };
  Status OpenFile(File* f, const StoredBounds& replace);

  rocksdb::DB* db_;
  StoreFamilies families_;
  File main_;
  File history_;
  std::uint64_t history_keys_ = 0;
};

}  // namespace epoch::server
