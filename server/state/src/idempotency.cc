#include "idempotency.h"

#include <algorithm>
#include <string>
#include <vector>

#include "epoch/etcd_errors.h"
#include "key_encoding.h"

namespace epoch::server {
namespace {

// A stored record, or nullopt when absent.
Result<std::optional<v1::StoredIdempotency>> ReadRecord(const StoreReader& reader,
                                                        std::string_view record_key) {
  Result<std::optional<std::string>> bytes = reader.Get(IdempotencyKey(record_key));
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<v1::StoredIdempotency>();
  v1::StoredIdempotency record;
  if (!record.ParseFromString(**bytes)) return Status::Corruption("undecodable idempotency record");
  return std::optional<v1::StoredIdempotency>(std::move(record));
}

// What one record counts for in StoredIdempotencyUsage::bytes (its expiry-queue entry is one per
// record and not counted).
std::int64_t RecordBytes(std::string_view record_key, const v1::StoredIdempotency& record) {
  return static_cast<std::int64_t>(record_key.size() + record.ByteSizeLong());
}

Status WriteUsage(rocksdb::WriteBatchWithIndex* batch, const v1::StoredIdempotencyUsage& usage) {
  // An empty table leaves no trace, so a store whose records all expired equals a fresh one.
  if (usage.records() == 0 && usage.bytes() == 0) {
    return FromRocks(batch->Delete(MetaKey(kMetaIdempotencyUsage)), "idempotency usage");
  }
  return FromRocks(batch->Put(MetaKey(kMetaIdempotencyUsage), usage.SerializeAsString()),
                   "idempotency usage");
}

// Replaces the record at `record_key` (`old`: what it held, nullopt when absent) with `record`:
// one expiry-queue entry per record, the usage adjusted.
Status PutRecord(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                 std::string_view record_key, const std::optional<v1::StoredIdempotency>& old,
                 const v1::StoredIdempotency& record, IdempotencyExpiryHint* hint) {
  Result<v1::StoredIdempotencyUsage> usage = ReadIdempotencyUsage(reader);
  if (!usage.ok()) return usage.status();
  if (old.has_value()) {
    EPOCH_RETURN_IF_ERROR(FromRocks(
        batch->Delete(IdempotencyExpiryKey(old->expires_cluster_ms(), record_key)), "expiry"));
    usage->set_records(usage->records() - 1);
    usage->set_bytes(usage->bytes() - RecordBytes(record_key, *old));
  }
  usage->set_records(usage->records() + 1);
  usage->set_bytes(usage->bytes() + RecordBytes(record_key, record));
  EPOCH_RETURN_IF_ERROR(
      FromRocks(batch->Put(IdempotencyKey(record_key), record.SerializeAsString()), "idempotency"));
  EPOCH_RETURN_IF_ERROR(FromRocks(
      batch->Put(IdempotencyExpiryKey(record.expires_cluster_ms(), record_key), rocksdb::Slice()),
      "idempotency expiry"));
  hint->earliest_ms = std::min(hint->earliest_ms, record.expires_cluster_ms());
  return WriteUsage(batch, *usage);
}

Status DeleteRecord(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                    std::string_view record_key, const v1::StoredIdempotency& record) {
  Result<v1::StoredIdempotencyUsage> usage = ReadIdempotencyUsage(reader);
  if (!usage.ok()) return usage.status();
  usage->set_records(usage->records() - 1);
  usage->set_bytes(usage->bytes() - RecordBytes(record_key, record));
  EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(IdempotencyKey(record_key)), "prune"));
  return WriteUsage(batch, *usage);
}

// A session record (`client_id`, `sequence`) that expired at `expired_ms` was pruned: its client's
// watermark covers it until kWatermarkRetentionMs after that.
Status RaiseWatermark(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                      std::string_view client_id, std::uint64_t sequence, std::int64_t expired_ms,
                      IdempotencyExpiryHint* hint) {
  const std::string record_key = IdempotencyWatermarkRecord(client_id);
  Result<std::optional<v1::StoredIdempotency>> old = ReadRecord(reader, record_key);
  if (!old.ok()) return old.status();
  v1::StoredIdempotency mark;
  mark.set_expired_through_sequence(sequence);
  mark.set_expires_cluster_ms(expired_ms + kWatermarkRetentionMs);
  if (old->has_value()) {
    mark.set_expired_through_sequence(std::max(sequence, (*old)->expired_through_sequence()));
    mark.set_expires_cluster_ms(std::max(mark.expires_cluster_ms(), (*old)->expires_cluster_ms()));
  }
  return PutRecord(reader, batch, record_key, *old, mark, hint);
}

bool TableFull(const v1::StoredIdempotencyUsage& usage, const v1::InternalRequest& request) {
  const std::int64_t records_max = request.idempotency_records_max();
  const std::int64_t bytes_max = request.idempotency_bytes_max();
  return (records_max > 0 && usage.records() >= records_max) ||
         (bytes_max > 0 && usage.bytes() >= bytes_max);
}

IdempotencyDecision Refuse(Status status) {
  return IdempotencyDecision{IdempotencyDecision::Kind::kRefuse, {}, std::move(status), {}};
}

}  // namespace

std::optional<IdempotencyId> IdempotencyIdOf(const v1::InternalRequest& request) {
  if (!request.idempotency_client_id().empty()) {
    IdempotencyId id;
    id.client_id = request.idempotency_client_id();
    id.sequence = request.idempotency_sequence();
    id.record_key = IdempotencySessionRecord(id.client_id, id.sequence);
    return id;
  }
  if (request.idempotency_key().empty()) return std::nullopt;
  return IdempotencyId{IdempotencyFreeFormRecord(request.idempotency_key()), {}, 0};
}

Result<IdempotencyDecision> DecideIdempotency(const StoreReader& reader, const IdempotencyId& id,
                                              const v1::InternalRequest& request,
                                              std::int64_t now_ms) {
  // The API refuses these; an entry that carries one anyway is refused the same way everywhere.
  if (id.session() && (id.sequence == 0 || id.client_id.size() > kIdempotencyClientIdMax)) {
    return Refuse(Status::InvalidArgument("epoch: malformed idempotency session key"));
  }
  Result<std::optional<v1::StoredIdempotency>> seen = ReadRecord(reader, id.record_key);
  if (!seen.ok()) return seen.status();
  if (seen->has_value()) {
    const v1::StoredIdempotency& record = **seen;
    if (record.expires_cluster_ms() > now_ms) {
      if (record.auth_user() != request.auth_user()) {
        return Refuse(etcd_errors::kPermissionDenied.ToStatus());
      }
      return IdempotencyDecision{IdempotencyDecision::Kind::kReplay, record, {}, {}};
    }
    // Expired, not pruned yet: a session key's repeat is late; a free-form key is forgotten.
    if (id.session()) return Refuse(etcd_errors::kIdempotencyExpired.ToStatus());
  } else if (id.session()) {
    Result<std::optional<v1::StoredIdempotency>> mark =
        ReadRecord(reader, IdempotencyWatermarkRecord(id.client_id));
    if (!mark.ok()) return mark.status();
    if (mark->has_value() && id.sequence <= (*mark)->expired_through_sequence()) {
      return Refuse(etcd_errors::kIdempotencyExpired.ToStatus());
    }
  }
  if (!seen->has_value()) {
    Result<v1::StoredIdempotencyUsage> usage = ReadIdempotencyUsage(reader);
    if (!usage.ok()) return usage.status();
    if (TableFull(*usage, request)) return Refuse(etcd_errors::kIdempotencyTableFull.ToStatus());
  }
  IdempotencyDecision apply;
  apply.expired = std::move(*seen);
  return apply;
}

Status RememberIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                           const IdempotencyId& id,
                           const std::optional<v1::StoredIdempotency>& expired,
                           std::string_view auth_user, std::int64_t expires_ms,
                           const v1::InternalResponse& response, const Status& status,
                           IdempotencyExpiryHint* hint) {
  v1::StoredIdempotency record;
  record.set_expires_cluster_ms(expires_ms);
  record.set_auth_user(std::string(auth_user));
  if (status.ok()) {
    record.set_response(response.SerializeAsString());
  } else {
    record.set_error_code(static_cast<std::int32_t>(status.code()));
    record.set_error_message(status.message());
  }
  return PutRecord(reader, batch, id.record_key, expired, record, hint);
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
    hint->earliest_ms = next_earliest;  // watermarks raised below lower it again
  }
  for (std::size_t i = 0; i < expired_keys.size(); ++i) {
    EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(expired_expiry_keys[i]), "prune"));
    // The record may have been replaced with a later expiry (a raised watermark) since this
    // entry was read: only drop it if it has expired.
    Result<std::optional<v1::StoredIdempotency>> record = ReadRecord(reader, expired_keys[i]);
    if (!record.ok()) return record.status();
    if (!record->has_value() || (*record)->expires_cluster_ms() > now_ms) continue;
    EPOCH_RETURN_IF_ERROR(DeleteRecord(reader, batch, expired_keys[i], **record));
    std::string client_id;
    std::uint64_t sequence = 0;
    if (ParseIdempotencySessionRecord(expired_keys[i], &client_id, &sequence)) {
      EPOCH_RETURN_IF_ERROR(RaiseWatermark(reader, batch, client_id, sequence,
                                           (*record)->expires_cluster_ms(), hint));
    }
  }
  return Status::Ok();
}

Result<v1::StoredIdempotencyUsage> ReadIdempotencyUsage(const StoreReader& reader) {
  Result<std::optional<std::string>> bytes = reader.Get(MetaKey(kMetaIdempotencyUsage));
  if (!bytes.ok()) return bytes.status();
  v1::StoredIdempotencyUsage usage;
  if (bytes->has_value() && !usage.ParseFromString(**bytes)) {
    return Status::Corruption("undecodable idempotency usage");
  }
  return usage;
}

}  // namespace epoch::server
