// Applying one Raft log command (epoch.v1.InternalRequest) to the pending write batch: validation,
// the idempotency table, and dispatch to the KV, compaction and lease code. Deterministic: it
// reads only the store and the request (including the leader's cluster-clock stamp).
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include "epoch/state/kv_store.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"
#include "idempotency.h"
#include "key_index.h"
#include "latest_cache.h"
#include "store_reader.h"

namespace epoch::server {

struct EntryContext {
  // Reads through `batch`.
  const StoreReader* reader;
  rocksdb::WriteBatchWithIndex* batch;
  const KvStoreOptions* options;
  // The applier's in-memory idempotency expiry hint for the state `batch` builds.
  IdempotencyExpiryHint* idempotency_hint;
  // The applier's metadata of keys' latest versions, kept in step with `batch` (nullptr: none).
  LatestCache* latest = nullptr;
  // The per-key history: `batch`'s writes are staged in it (never null).
  KeyIndex* index = nullptr;
  // Whether PUT events must carry the previous value (KvStoreOptions::lazy_prev_values).
  bool prev_values = true;
};

// Whether applying `request` may read the per-key history or the revision records of earlier
// entries (a txn with a Range at an explicit revision; a compaction reads none: compaction.h).
// WriteTxn writes those tables past the pending batch's index, so such an entry must find every
// earlier entry in the database itself (KvStore::ApplyBatch writes the batch out first).
[[nodiscard]] bool ReadsHistory(const v1::InternalRequest& request);

// Applies `request` on top of `*meta`, which is updated when the request succeeds (revision,
// compact revision). The caller has already advanced meta->cluster_time_ms. A request error
// leaves no trace in the batch (except idempotency bookkeeping) and is returned in
// ApplyResult::status; a storage error is returned as a failed Result.
Result<ApplyResult> ApplyEntry(const EntryContext& ctx, KvStore::Meta* meta,
                               const v1::InternalRequest& request);

}  // namespace epoch::server
