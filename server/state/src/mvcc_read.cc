#include "mvcc_read.h"

#include <string>
#include <vector>

#include "epoch/etcd_errors.h"
#include "key_index.h"

namespace epoch::server {

namespace {

// Reads the revision record at `rev` and returns its key-value.
Result<mvccpb::KeyValue> ReadPutRecord(const StoreReader& reader, RevisionPair rev) {
  Result<std::optional<std::string>> bytes = reader.Get(RevisionKey(rev));
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) {
    return Status::Corruption("index entry without revision record at " + std::to_string(rev.main) +
                              "." + std::to_string(rev.sub));
  }
  v1::StoredEvent ev;
  EPOCH_RETURN_IF_ERROR(ParseStoredEvent(**bytes, &ev));
  return std::move(*ev.mutable_kv());
}

// Live keys of `range` at `rev` from the index, values from their revision records. The index
// only names the records (under its lock); they are read afterwards, through the reader's
// snapshot, which holds every record at or below its revision.
Status ReadHistoricalRange(const StoreReader& reader, const KeyRange& range, Revision rev,
                           std::int64_t limit, bool count_only, std::int64_t max_keys,
                           RawRange* out) {
  std::vector<RevisionPair> wanted;
  EPOCH_RETURN_IF_ERROR(
      reader.index().LiveAt(range, rev, [&](const std::string&, RevisionPair pair) {
        ++out->count;
        if (max_keys != kNoKeyBound && out->count > max_keys) return false;
        if (!count_only && (limit <= 0 || static_cast<std::int64_t>(wanted.size()) < limit)) {
          wanted.push_back(pair);
        }
        return true;
      }));
  if (max_keys != kNoKeyBound && out->count > max_keys)
    return etcd_errors::kTxnReadTooLarge.ToStatus();
  out->kvs.reserve(wanted.size());
  for (const RevisionPair& pair : wanted) {
    Result<mvccpb::KeyValue> kv = ReadPutRecord(reader, pair);
    if (!kv.ok()) return kv.status();
    out->kvs.push_back(std::move(*kv));
  }
  return Status::Ok();
}

Status ReadLatestRange(const StoreReader& reader, const KeyRange& range, std::int64_t limit,
                       bool count_only, std::int64_t max_keys, RawRange* out) {
  BoundedIterator it = reader.NewIterator(LatestBounds(range));
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    ++out->count;
    if (max_keys != kNoKeyBound && out->count > max_keys)
      return etcd_errors::kTxnReadTooLarge.ToStatus();
    if (count_only) continue;
    if (limit > 0 && static_cast<std::int64_t>(out->kvs.size()) >= limit) continue;
    EPOCH_RETURN_IF_ERROR(ParseKeyValue(it.value(), &out->kvs.emplace_back()));
  }
  return it.status();
}

}  // namespace

Status ParseKeyValue(std::string_view bytes, mvccpb::KeyValue* kv) {
  if (!kv->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption("undecodable key-value record");
  }
  return Status::Ok();
}

Status ParseStoredEvent(std::string_view bytes, v1::StoredEvent* ev) {
  if (!ev->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption("undecodable revision record");
  }
  return Status::Ok();
}

Result<RawRange> ReadRangeAt(const StoreReader& reader, const KeyRange& range, Revision rev,
                             bool at_current, std::int64_t limit, bool count_only,
                             std::int64_t max_keys) {
  RawRange out;
  if (range.kind == KeyRange::Kind::kRange && range.end <= range.key) return out;  // empty
  if (at_current) {
    EPOCH_RETURN_IF_ERROR(ReadLatestRange(reader, range, limit, count_only, max_keys, &out));
  } else {
    EPOCH_RETURN_IF_ERROR(
        ReadHistoricalRange(reader, range, rev, limit, count_only, max_keys, &out));
  }
  return out;
}

Result<std::optional<mvccpb::KeyValue>> ReadLatest(const StoreReader& reader,
                                                   std::string_view key) {
  Result<std::optional<std::string>> bytes = reader.Get(LatestKey(key));
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<mvccpb::KeyValue>();
  mvccpb::KeyValue kv;
  EPOCH_RETURN_IF_ERROR(ParseKeyValue(**bytes, &kv));
  return std::optional<mvccpb::KeyValue>(std::move(kv));
}

Result<std::optional<mvccpb::KeyValue>> ReadKeyAt(const StoreReader& reader, std::string_view key,
                                                  Revision rev) {
  const std::optional<KeyIndex::Entry> last = reader.index().LastAt(key, rev);
  if (!last || !last->put) return std::optional<mvccpb::KeyValue>();
  Result<mvccpb::KeyValue> kv = ReadPutRecord(reader, last->rev());
  if (!kv.ok()) return kv.status();
  return std::optional<mvccpb::KeyValue>(std::move(*kv));
}

}  // namespace epoch::server
