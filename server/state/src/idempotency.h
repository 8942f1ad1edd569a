// The idempotency table (docs/formats.md §3.1): a write carrying an idempotency key is applied
// once; its response (or deterministic error) is remembered until a deadline on the cluster clock,
// and a retry with the same key within that time gets the remembered answer without being applied
// again. Expired records are removed a few at a time as entries are applied, so the work per entry
// stays bounded.
//
// Two kinds of key. A free-form key is forgotten when its record expires. A session key (client
// id + sequence number, Raft thesis §6.3) leaves a trace when its record is pruned: the client's
// watermark, the highest sequence whose record expired, kept kWatermarkRetentionMs longer. A
// session request at or below the watermark, or whose record expired but is not pruned yet, is
// refused with kIdempotencyExpired: a late retry is never applied a second time.
//
// The table is bounded by the records and bytes limits each keyed entry carries (set by its
// proposer), against the usage kept in meta "idempotency_usage".
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "epoch/state/kv_validation.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"
#include "store_reader.h"

namespace epoch::server {

// How long a client's watermark outlives the expiry of the record that raised it. A retry later
// than this after its record expired is applied again: clients retry for seconds, not days.
inline constexpr std::int64_t kWatermarkRetentionMs = 7LL * 24 * 60 * 60 * 1000;

// Which record of the table a keyed request names.
struct IdempotencyId {
  std::string record_key;  // within the 'd' table: kind byte, then the key (key_encoding.h)
  std::string client_id;   // session keys only
  std::uint64_t sequence = 0;

  [[nodiscard]] bool session() const { return !client_id.empty(); }
};

// The request's key, or nullopt when it carries none.
std::optional<IdempotencyId> IdempotencyIdOf(const v1::InternalRequest& request);

// What to do with a keyed request before it is applied.
struct IdempotencyDecision {
  enum class Kind { kApply, kReplay, kRefuse };
  Kind kind = Kind::kApply;
  v1::StoredIdempotency record;  // kReplay
  Status refusal;                // kRefuse: the request is neither applied nor remembered
  // kApply: the expired record the answer will replace (a free-form key not pruned yet).
  std::optional<v1::StoredIdempotency> expired;
};

Result<IdempotencyDecision> DecideIdempotency(const StoreReader& reader, const IdempotencyId& id,
                                              const v1::InternalRequest& request,
                                              std::int64_t now_ms);

// What the applier knows, in memory, about the earliest expiry in the table: no record expires
// before `earliest_ms`. It lets PruneIdempotency skip the table scan on almost every entry
// without changing what is pruned when, so replicas stay identical whatever their hint history.
// kUnknownExpiry (the value after open or a snapshot install) forces one scan.
struct IdempotencyExpiryHint {
  static constexpr std::int64_t kUnknownExpiry = INT64_MIN;
  std::int64_t earliest_ms = kUnknownExpiry;
};

// Remembers the outcome of the request `id` (stamped with `auth_user`) until `expires_ms`, in
// place of `expired` (IdempotencyDecision::expired); lowers `hint`.
Status RememberIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                           const IdempotencyId& id,
                           const std::optional<v1::StoredIdempotency>& expired,
                           std::string_view auth_user, std::int64_t expires_ms,
                           const v1::InternalResponse& response, const Status& status,
                           IdempotencyExpiryHint* hint);

// Removes up to `max_count` records that expired at or before `now_ms`, raising the watermark of
// each session record's client. Scans only when `hint` says something may have expired, and
// updates it from what the scan saw.
Status PruneIdempotency(const StoreReader& reader, rocksdb::WriteBatchWithIndex* batch,
                        std::int64_t now_ms, int max_count, IdempotencyExpiryHint* hint);

// The table's usage as stored (zero when the meta record is absent).
Result<v1::StoredIdempotencyUsage> ReadIdempotencyUsage(const StoreReader& reader);

}  // namespace epoch::server
