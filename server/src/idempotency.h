// The idempotency table (DESIGN.md §5): a write carrying an idempotency key is applied once; its
// response (or deterministic error) is remembered until a deadline on the cluster clock, and a
// retry with the same key within that time gets the remembered answer without being applied
// again. Expired records are removed a few at a time as entries are applied, so the work per
// entry stays bounded.
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

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

// Remembers the outcome of the request with `key` until `expires_ms`.
Status RememberIdempotency(rocksdb::WriteBatchWithIndex* batch, std::string_view key,
                           std::int64_t expires_ms, const v1::InternalResponse& response,
                           const Status& status);

// Removes up to `max_count` records that expired at or before `now_ms`.
Status PruneIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                        std::int64_t now_ms, int max_count);

}  // namespace epoch::server
