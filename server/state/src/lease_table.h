// The lease table of the state machine: grant, revoke (deleting every attached key in one
// revision), and renewal against the replicated cluster clock (docs/timing-and-safety.md §7,
// docs/etcd-compatibility.md §3.4). TTLs are milliseconds; the etcd API's seconds are converted by
// the gRPC layer.
// Expiry is decided by the leader, which proposes a revoke for each lease whose deadline passed
// on the cluster clock; this table only records deadlines.
//
// Thread-safety: the Apply* functions run on the applier thread; the Read* functions on any
// thread with its own reader.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.pb.h"
#include "store_reader.h"
#include "write_txn.h"

namespace epoch::server {

Result<std::optional<v1::StoredLease>> ReadLease(const StoreReader& reader, LeaseId id);
Result<std::vector<v1::StoredLease>> ReadAllLeases(const StoreReader& reader);
// Keys attached to the lease, in key order.
Result<std::vector<std::string>> ReadLeaseKeys(const StoreReader& reader, LeaseId id);

// Creates the lease with deadline now + ttl. Errors: ID 0 or TTL <= 0 (invalid argument),
// existing ID ("lease already exists"), TTL above max ("too large lease TTL").
Result<v1::LeaseGrantResult> ApplyLeaseGrant(const StoreReader& reader,
                                             rocksdb::WriteBatchWithIndex* batch,
                                             const v1::LeaseGrant& grant, std::int64_t now_ms,
                                             std::int64_t max_ttl_ms);

// Deletes the lease and all its keys (sorted, one revision, DELETE events). Unknown lease:
// "requested lease not found".
Result<etcdserverpb::LeaseRevokeResponse> ApplyLeaseRevoke(const StoreReader& reader,
                                                           rocksdb::WriteBatchWithIndex* batch,
                                                           WriteTxn* txn, LeaseId id);

// Each known lease's deadline becomes now + its TTL; unknown leases report ttl_ms 0.
Result<v1::LeaseRenewalsResponse> ApplyLeaseRenewals(const StoreReader& reader,
                                                     rocksdb::WriteBatchWithIndex* batch,
                                                     const v1::LeaseRenewals& renewals,
                                                     std::int64_t now_ms);

}  // namespace epoch::server
