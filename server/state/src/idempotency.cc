#include "idempotency.h"

#include <algorithm>
#include <string>
#include <vector>

#include "key_encoding.h"

namespace epoch::server {

Result<std::optional<v1::StoredIdempotency>> LookupIdempotency(const StoreReader& reader,
                                                               std::string_view key,
                                                               std::int64_t now_ms) {
  Result<std::optional<std::string>> bytes = reader.Get(IdempotencyKey(key));
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<v1::StoredIdempotency>();
  v1::StoredIdempotency record;
  if (!record.ParseFromString(**bytes)) return Status::Corruption("undecodable idempotency record");
  if (record.expires_cluster_ms() <= now_ms) return std::optional<v1::StoredIdempotency>();
  return std::optional<v1::StoredIdempotency>(std::move(record));
}

Status RememberIdempotency(rocksdb::WriteBatchWithIndex* batch, std::string_view key,
                           std::int64_t expires_ms, const v1::InternalResponse& response,
                           const Status& status, IdempotencyExpiryHint* hint) {
  hint->earliest_ms = std::min(hint->earliest_ms, expires_ms);
  v1::StoredIdempotency record;
  record.set_expires_cluster_ms(expires_ms);
  if (status.ok()) {
    record.set_response(response.SerializeAsString());
  } else {
    record.set_error_code(static_cast<std::int32_t>(status.code()));
    record.set_error_message(status.message());
  }
  EPOCH_RETURN_IF_ERROR(
      FromRocks(batch->Put(IdempotencyKey(key), record.SerializeAsString()), "idempotency"));
  return FromRocks(batch->Put(IdempotencyExpiryKey(expires_ms, key), rocksdb::Slice()),
                   "idempotency expiry");
}

Status PruneIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                        std::int64_t now_ms, int max_count, IdempotencyExpiryHint* hint) {
  if (now_ms < hint->earliest_ms) return Status::Ok();
  std::vector<std::string> expired_expiry_keys;
  std::vector<std::string> expired_keys;
  {
    BoundedIterator it = reader.NewIterator(TableBounds(kIdempotencyExpiryTable));
    std::int64_t expires_ms = 0;
    std::string key;
    // Exhausting the table means nothing is left to expire; stopping at a live record means
    // nothing expires before it; stopping at max_count means more may be due now.
    std::int64_t next_earliest = INT64_MAX;
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      if (!ParseIdempotencyExpiryKey(it.key(), &expires_ms, &key)) {
        return Status::Corruption("malformed idempotency expiry key");
      }
      if (expires_ms > now_ms) {
        next_earliest = expires_ms;
        break;
      }
      if (static_cast<int>(expired_keys.size()) >= max_count) {
        next_earliest = now_ms;
        break;
      }
      expired_expiry_keys.emplace_back(it.key());
      expired_keys.push_back(key);
    }
    EPOCH_RETURN_IF_ERROR(it.status());
    hint->earliest_ms = next_earliest;
  }
  for (std::size_t i = 0; i < expired_keys.size(); ++i) {
    EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(expired_expiry_keys[i]), "prune"));
    // The key may have been re-remembered with a later expiry: only drop the record if it is
    // the one this expiry entry belongs to.
    Result<std::optional<std::string>> bytes = reader.Get(IdempotencyKey(expired_keys[i]));
    if (!bytes.ok()) return bytes.status();
    if (!bytes->has_value()) continue;
    v1::StoredIdempotency record;
    if (!record.ParseFromString(**bytes)) return Status::Corruption("undecodable idempotency");
    if (record.expires_cluster_ms() <= now_ms) {
      EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(IdempotencyKey(expired_keys[i])), "prune"));
    }
  }
  return Status::Ok();
}

}  // namespace epoch::server
