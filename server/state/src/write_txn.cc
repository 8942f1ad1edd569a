#include "write_txn.h"

#include <string>

#include "epoch/v1/internal.pb.h"
#include "mvcc_read.h"

namespace epoch::server {

namespace {

rocksdb::Slice ToSlice(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

WriteTxn::WriteTxn(const StoreReader* reader, rocksdb::WriteBatchWithIndex* batch, KeyIndex* index,
                   Revision begin, LatestCache* latest, bool prev_values)
    : reader_(reader),
      batch_(batch),
      index_(index),
      begin_(begin),
      latest_(latest),
      prev_values_(prev_values) {}

Result<std::optional<mvccpb::KeyValue>> WriteTxn::PreviousForPut(std::string_view key,
                                                                 bool need_value,
                                                                 bool* value_known) {
  *value_known = true;
  if (!need_value && !prev_values_ && latest_ != nullptr) {
    if (const LatestCache::Entry* e = latest_->Find(key)) {
      mvccpb::KeyValue kv;
      kv.set_key(std::string(key));
      kv.set_create_revision(e->create_revision);
      kv.set_mod_revision(e->mod_revision);
      kv.set_version(e->version);
      kv.set_lease(e->lease);
      *value_known = false;
      return std::optional<mvccpb::KeyValue>(std::move(kv));
    }
  }
  return ReadLatest(*reader_, key);
}

// Field 1 (varint; omitted for PUT = 0, as protobuf omits defaults), then field 2 (the key-value,
// length-delimited).
std::string EncodeStoredEvent(mvccpb::Event::EventType type, std::string_view kv_bytes) {
  std::string out;
  out.reserve(kv_bytes.size() + 16);
  auto varint = [&out](std::uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  if (type != mvccpb::Event::PUT) {
    out.push_back(0x08);  // field 1, varint
    varint(static_cast<std::uint64_t>(type));
  }
  out.push_back(0x12);  // field 2, length-delimited
  varint(kv_bytes.size());
  out.append(kv_bytes);
  return out;
}

Status WriteTxn::WriteRecord(RevisionPair pair, mvccpb::Event::EventType type, std::string_view key,
                             std::string_view kv_bytes) {
  // Past the batch's index, straight into its WriteBatch: these keys are new (one revision each),
  // so the index would only cost two skip list searches per key. Reads through the pending batch
  // do not see them, nor the staged history entry; entries that read history start from the
  // database (ReadsHistory).
  rocksdb::WriteBatch* raw = batch_->GetWriteBatch();
  EPOCH_RETURN_IF_ERROR(Rocks(
      raw->Put(reader_->families().history, RevisionKey(pair), EncodeStoredEvent(type, kv_bytes))));
  return index_->Stage(key, pair, type == mvccpb::Event::PUT);
}

Result<std::int64_t> WriteTxn::Put(std::string_view key, std::string_view value, LeaseId lease,
                                   mvccpb::KeyValue* prev, bool prev_value_known) {
  const RevisionPair pair = NextPair();
  // Built in the event itself: the event owns the only copy of the new key-value.
  mvccpb::Event& ev = events_.emplace_back();
  ev.set_type(mvccpb::Event::PUT);
  mvccpb::KeyValue& kv = *ev.mutable_kv();
  kv.set_key(std::string(key));
  kv.set_value(std::string(value));
  kv.set_mod_revision(pair.main);
  kv.set_create_revision(prev != nullptr ? prev->create_revision() : pair.main);
  kv.set_version(prev != nullptr ? prev->version() + 1 : 1);
  kv.set_lease(lease.value());

  const std::string kv_bytes = kv.SerializeAsString();
  EPOCH_RETURN_IF_ERROR(WriteRecord(pair, mvccpb::Event::PUT, key, kv_bytes));
  EPOCH_RETURN_IF_ERROR(Rocks(batch_->Put(LatestKey(key), ToSlice(kv_bytes))));
  if (prev != nullptr && prev->lease() != 0 && prev->lease() != lease.value()) {
    EPOCH_RETURN_IF_ERROR(Rocks(batch_->Delete(LeaseAttachKey(LeaseId(prev->lease()), key))));
  }
  if (!lease.IsZero()) {
    EPOCH_RETURN_IF_ERROR(Rocks(batch_->Put(LeaseAttachKey(lease, key), rocksdb::Slice())));
  }
  if (latest_ != nullptr) {
    latest_->Put(
        key, LatestCache::Entry{kv.create_revision(), kv.mod_revision(), kv.version(), kv.lease()});
  }
  // `value` may point into *prev: it was copied above, so prev can be moved now.
  if (prev != nullptr && prev_value_known) *ev.mutable_prev_kv() = std::move(*prev);
  return pair.main;
}

Result<std::vector<mvccpb::KeyValue>> WriteTxn::DeleteRange(const KeyRange& range) {
  // Read first, then write: the batch must not change under the iterator.
  Result<RawRange> live = ReadRangeAt(*reader_, range, current(), /*at_current=*/true, 0, false);
  if (!live.ok()) return live.status();
  for (const mvccpb::KeyValue& prev : live->kvs) {
    const RevisionPair pair = NextPair();
    // A DELETE event carries only the key and the deletion revision (etcd: mod_revision).
    mvccpb::KeyValue tombstone;
    tombstone.set_key(prev.key());
    tombstone.set_mod_revision(pair.main);
    EPOCH_RETURN_IF_ERROR(
        WriteRecord(pair, mvccpb::Event::DELETE, prev.key(), tombstone.SerializeAsString()));
    EPOCH_RETURN_IF_ERROR(Rocks(batch_->Delete(LatestKey(prev.key()))));
    if (latest_ != nullptr) latest_->Erase(prev.key());
    if (prev.lease() != 0) {
      EPOCH_RETURN_IF_ERROR(
          Rocks(batch_->Delete(LeaseAttachKey(LeaseId(prev.lease()), prev.key()))));
    }
    mvccpb::Event& ev = events_.emplace_back();
    ev.set_type(mvccpb::Event::DELETE);
    *ev.mutable_kv() = std::move(tombstone);
    *ev.mutable_prev_kv() = prev;
  }
  return std::move(live->kvs);
}

}  // namespace epoch::server
