// The idempotency table (docs/formats.md §3.1): a write carrying an idempotency key is applied
// once; its response (or deterministic error) is remembered until a deadline on the cluster clock,
// and a retry with the same key within that time gets the remembered answer without being applied
// again. Expired records are removed a few at a time as entries are applied, so the work per entry
// stays bounded.
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string_view>

#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"
#include "store_reader.h"

namespace epoch::server {

// The remembered record for `key` if it has not expired at `now_ms`.
Result<std::optional<v1::StoredIdempotency>> LookupIdempotency(const StoreReader& reader,
                                                               std::string_view key,
                                                               std::int64_t now_ms);

// What the applier knows, in memory, about the earliest expiry in the table: no record expires
// before `earliest_ms`. It lets PruneIdempotency skip the table scan on almost every entry
// without changing what is pruned when, so replicas stay identical whatever their hint history.
// kUnknownExpiry (the value after open or a snapshot install) forces one scan.
struct IdempotencyExpiryHint {
  static constexpr std::int64_t kUnknownExpiry = INT64_MIN;
  std::int64_t earliest_ms = kUnknownExpiry;
};

// Remembers the outcome of the request with `key` until `expires_ms`; lowers `hint`.
Status RememberIdempotency(rocksdb::WriteBatchWithIndex* batch, std::string_view key,
                           std::int64_t expires_ms, const v1::InternalResponse& response,
                           const Status& status, IdempotencyExpiryHint* hint);

// Removes up to `max_count` records that expired at or before `now_ms`. Scans only when `hint`
// says something may have expired, and updates it from what the scan saw.
Status PruneIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                        std::int64_t now_ms, int max_count, IdempotencyExpiryHint* hint);

}  // namespace epoch::server
