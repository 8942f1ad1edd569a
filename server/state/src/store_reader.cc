#include "store_reader.h"

#include <utility>

namespace epoch::server {

Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return Status::Ok();
  std::string msg = std::string(what) + ": " + s.ToString();
  if (s.IsCorruption()) return Status::Corruption(std::move(msg));
  return Status::IOError(std::move(msg));
}

bool IsStorageError(const Status& s) {
  return s.Is(StatusCode::kIOError) || s.Is(StatusCode::kCorruption);
}

BoundedIterator::BoundedIterator(std::unique_ptr<rocksdb::Iterator> it, StoredBounds bounds)
    : it_(std::move(it)), bounds_(std::move(bounds)) {}

bool BoundedIterator::Valid() const {
  if (!it_->Valid()) return false;
  rocksdb::Slice k = it_->key();
  std::string_view key(k.data(), k.size());
  if (key < bounds_.lower) return false;
  return bounds_.upper.empty() || key < bounds_.upper;
}

std::string_view BoundedIterator::key() const {
  rocksdb::Slice k = it_->key();
  return {k.data(), k.size()};
}

std::string_view BoundedIterator::value() const {
  rocksdb::Slice v = it_->value();
  return {v.data(), v.size()};
}

Status BoundedIterator::status() const { return FromRocks(it_->status(), "iterate"); }

StoreReader::StoreReader(rocksdb::DB* db, StoreFamilies families, const rocksdb::Snapshot* snapshot,
                         rocksdb::WriteBatchWithIndex* pending, const KeyIndex* index)
    : db_(db), families_(families), snapshot_(snapshot), pending_(pending), index_(index) {}

Result<std::optional<std::string>> StoreReader::Get(std::string_view key) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot_;
  std::string value;
  rocksdb::Slice k(key.data(), key.size());
  rocksdb::ColumnFamilyHandle* family = families_.For(key);
  rocksdb::Status s = pending_ != nullptr ? pending_->GetFromBatchAndDB(db_, ro, family, k, &value)
                                          : db_->Get(ro, family, k, &value);
  if (s.IsNotFound()) return std::optional<std::string>();
  if (!s.ok()) return FromRocks(s, "get");
  return std::optional<std::string>(std::move(value));
}

BoundedIterator StoreReader::NewIterator(StoredBounds bounds) const {
  rocksdb::ReadOptions ro;
  ro.snapshot = snapshot_;
  // No iterate_upper_bound: the pending batch's delta iterator does not honour it everywhere, so
  // BoundedIterator checks both bounds itself.
  rocksdb::ColumnFamilyHandle* family = families_.For(bounds.lower);
  std::unique_ptr<rocksdb::Iterator> base(db_->NewIterator(ro, family));
  if (pending_ == nullptr) return BoundedIterator(std::move(base), std::move(bounds));
  std::unique_ptr<rocksdb::Iterator> merged(pending_->NewIteratorWithBase(family, base.release()));
  return BoundedIterator(std::move(merged), std::move(bounds));
}

}  // namespace epoch::server
