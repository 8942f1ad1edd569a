#include "lease_table.h"

#include "epoch/etcd_errors.h"
#include "key_encoding.h"

namespace epoch::server {

namespace {

Status ParseLease(std::string_view bytes, v1::StoredLease* lease) {
  if (!lease->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption("undecodable lease record");
  }
  return Status::Ok();
}

Status WriteLease(rocksdb::WriteBatchWithIndex* batch, const v1::StoredLease& lease) {
  return FromRocks(batch->Put(LeaseKey(LeaseId(lease.id())), lease.SerializeAsString()),
                   "write lease");
}

}  // namespace

Result<std::optional<v1::StoredLease>> ReadLease(const StoreReader& reader, LeaseId id) {
  Result<std::optional<std::string>> bytes = reader.Get(LeaseKey(id));
  if (!bytes.ok()) return bytes.status();
  if (!bytes->has_value()) return std::optional<v1::StoredLease>();
  v1::StoredLease lease;
  EPOCH_RETURN_IF_ERROR(ParseLease(**bytes, &lease));
  return std::optional<v1::StoredLease>(std::move(lease));
}

Result<std::vector<v1::StoredLease>> ReadAllLeases(const StoreReader& reader) {
  std::vector<v1::StoredLease> out;
  BoundedIterator it = reader.NewIterator(TableBounds(kLeaseTable));
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    EPOCH_RETURN_IF_ERROR(ParseLease(it.value(), &out.emplace_back()));
  }
  EPOCH_RETURN_IF_ERROR(it.status());
  return out;
}

Result<std::vector<std::string>> ReadLeaseKeys(const StoreReader& reader, LeaseId id) {
  std::vector<std::string> keys;
  const std::string prefix = LeaseAttachPrefix(id);
  BoundedIterator it = reader.NewIterator(StoredBounds{prefix, PrefixEnd(prefix)});
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    keys.emplace_back(it.key().substr(prefix.size()));
  }
  EPOCH_RETURN_IF_ERROR(it.status());
  return keys;
}

Result<v1::LeaseGrantResult> ApplyLeaseGrant(const StoreReader& reader,
                                             rocksdb::WriteBatchWithIndex* batch,
                                             const v1::LeaseGrant& grant, std::int64_t now_ms,
                                             std::int64_t max_ttl_ms) {
  if (grant.id() == 0) return Status::InvalidArgument("lease grant without an ID");
  if (grant.ttl_ms() <= 0) return Status::InvalidArgument("lease TTL must be positive");
  if (grant.ttl_ms() > max_ttl_ms) return etcd_errors::kLeaseTtlTooLarge.ToStatus();
  Result<std::optional<v1::StoredLease>> existing = ReadLease(reader, LeaseId(grant.id()));
  if (!existing.ok()) return existing.status();
  if (existing->has_value()) return etcd_errors::kLeaseExist.ToStatus();

  v1::StoredLease lease;
  lease.set_id(grant.id());
  lease.set_ttl_ms(grant.ttl_ms());
  lease.set_deadline_cluster_ms(now_ms + grant.ttl_ms());
  EPOCH_RETURN_IF_ERROR(WriteLease(batch, lease));

  v1::LeaseGrantResult result;
  result.set_id(lease.id());
  result.set_ttl_ms(lease.ttl_ms());
  result.set_deadline_cluster_ms(lease.deadline_cluster_ms());
  return result;
}

Result<etcdserverpb::LeaseRevokeResponse> ApplyLeaseRevoke(const StoreReader& reader,
                                                           rocksdb::WriteBatchWithIndex* batch,
                                                           WriteTxn* txn, LeaseId id) {
  Result<std::optional<v1::StoredLease>> lease = ReadLease(reader, id);
  if (!lease.ok()) return lease.status();
  if (!lease->has_value()) return etcd_errors::kLeaseNotFound.ToStatus();
  Result<std::vector<std::string>> keys = ReadLeaseKeys(reader, id);
  if (!keys.ok()) return keys.status();
  // Keys come sorted from the attachment table, as etcd's lessor sorts them before deleting.
  for (const std::string& key : *keys) {
    Result<std::vector<mvccpb::KeyValue>> deleted = txn->DeleteRange(MakeKeyRange(key, ""));
    if (!deleted.ok()) return deleted.status();
  }
  EPOCH_RETURN_IF_ERROR(FromRocks(batch->Delete(LeaseKey(id)), "revoke lease"));
  etcdserverpb::LeaseRevokeResponse resp;
  resp.mutable_header()->set_revision(txn->current().value());
  return resp;
}

Result<v1::LeaseRenewalsResponse> ApplyLeaseRenewals(const StoreReader& reader,
                                                     rocksdb::WriteBatchWithIndex* batch,
                                                     const v1::LeaseRenewals& renewals,
                                                     std::int64_t now_ms) {
  v1::LeaseRenewalsResponse resp;
  for (std::int64_t id : renewals.ids()) {
    v1::LeaseRenewalResult* result = resp.add_results();
    result->set_id(id);
    Result<std::optional<v1::StoredLease>> lease = ReadLease(reader, LeaseId(id));
    if (!lease.ok()) return lease.status();
    if (!lease->has_value()) continue;
    v1::StoredLease& l = **lease;
    l.set_deadline_cluster_ms(now_ms + l.ttl_ms());
    EPOCH_RETURN_IF_ERROR(WriteLease(batch, l));
    result->set_ttl_ms(l.ttl_ms());
    result->set_deadline_cluster_ms(l.deadline_cluster_ms());
  }
  return resp;
}

}  // namespace epoch::server
