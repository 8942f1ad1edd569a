#include "mvcc_read.h"

#include <limits>
#include <string>

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

// Scans the per-key history: for each user key keeps the last entry with main <= rev.
class HistoryScan {
 public:
  HistoryScan(const StoreReader& reader, Revision rev, std::int64_t limit, bool count_only,
              RawRange* out)
      : reader_(reader), rev_(rev), limit_(limit), count_only_(count_only), out_(out) {}

  Status Run(const KeyRange& range) {
    BoundedIterator it = reader_.NewIterator(IndexBounds(range));
    std::string user_key;
    RevisionPair pair;
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      if (!ParseIndexKey(it.key(), &user_key, &pair)) {
        return Status::Corruption("malformed index key");
      }
      if (has_group_ && user_key != group_key_) EPOCH_RETURN_IF_ERROR(EmitGroup());
      if (!has_group_) {
        has_group_ = true;
        group_key_ = user_key;
        best_valid_ = false;
      }
      if (pair.main <= rev_.value()) {
        best_valid_ = true;
        best_ = pair;
        best_is_put_ = !it.value().empty() && it.value()[0] == kIndexPut;
      }
    }
    EPOCH_RETURN_IF_ERROR(it.status());
    if (has_group_) EPOCH_RETURN_IF_ERROR(EmitGroup());
    return Status::Ok();
  }

 private:
  Status EmitGroup() {
    has_group_ = false;
    if (!best_valid_ || !best_is_put_) return Status::Ok();
    ++out_->count;
    if (count_only_) return Status::Ok();
    if (limit_ > 0 && static_cast<std::int64_t>(out_->kvs.size()) >= limit_) return Status::Ok();
    Result<mvccpb::KeyValue> kv = ReadPutRecord(reader_, best_);
    if (!kv.ok()) return kv.status();
    out_->kvs.push_back(std::move(*kv));
    return Status::Ok();
  }

  const StoreReader& reader_;
  Revision rev_;
  std::int64_t limit_;
  bool count_only_;
  RawRange* out_;
  bool has_group_ = false;
  std::string group_key_;
  bool best_valid_ = false;
  bool best_is_put_ = false;
  RevisionPair best_;
};

Status ReadLatestRange(const StoreReader& reader, const KeyRange& range, std::int64_t limit,
                       bool count_only, RawRange* out) {
  BoundedIterator it = reader.NewIterator(LatestBounds(range));
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    ++out->count;
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
                             bool at_current, std::int64_t limit, bool count_only) {
  RawRange out;
  if (range.kind == KeyRange::Kind::kRange && range.end <= range.key) return out;  // empty
  if (at_current) {
    EPOCH_RETURN_IF_ERROR(ReadLatestRange(reader, range, limit, count_only, &out));
  } else {
    HistoryScan scan(reader, rev, limit, count_only, &out);
    EPOCH_RETURN_IF_ERROR(scan.Run(range));
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
  BoundedIterator it = reader.NewIterator(IndexBounds(MakeKeyRange(key, "")));
  it.SeekForPrev(IndexKey(key, {rev.value(), std::numeric_limits<std::int64_t>::max()}));
  if (!it.Valid()) {
    EPOCH_RETURN_IF_ERROR(it.status());
    return std::optional<mvccpb::KeyValue>();
  }
  std::string user_key;
  RevisionPair pair;
  if (!ParseIndexKey(it.key(), &user_key, &pair)) return Status::Corruption("malformed index key");
  if (it.value().empty() || it.value()[0] != kIndexPut) return std::optional<mvccpb::KeyValue>();
  Result<mvccpb::KeyValue> kv = ReadPutRecord(reader, pair);
  if (!kv.ok()) return kv.status();
  return std::optional<mvccpb::KeyValue>(std::move(*kv));
}

}  // namespace epoch::server
