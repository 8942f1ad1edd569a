// Raw MVCC reads over KvStore's tables: the live keys of a range as of a revision, one key as of
// a revision, and decoding of stored records. No etcd request semantics here (that is
// range_query.h); these are the primitives Range, Txn, Watch and compaction are built from.
//
// Thread-safety: pure functions of a StoreReader.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "epoch/v1/internal.pb.h"
#include "key_encoding.h"
#include "mvccpb/kv.pb.h"
#include "store_reader.h"

namespace epoch::server {

struct RawRange {
  // Live keys in key order.
  std::vector<mvccpb::KeyValue> kvs;
  // Number of live keys in the range (all of them, not only those returned).
  std::int64_t count = 0;
};

// Live keys in `range` as of revision `rev`. When `at_current`, `rev` is the store's current
// revision and the latest table is read; otherwise the reader's KeyIndex names the revision
// records to read. At most `limit` kvs are returned (0: no limit); with `count_only` none are.
// The caller checks compaction against its own meta; a compaction published since (the index's
// compact revision above `rev`) fails with etcd's "compacted". With `max_keys` >= 0 (not
// kNoKeyBound), a range of more live keys fails with kTxnReadTooLarge as soon as the scan passes
// that many.
inline constexpr std::int64_t kNoKeyBound = -1;
Result<RawRange> ReadRangeAt(const StoreReader& reader, const KeyRange& range, Revision rev,
                             bool at_current, std::int64_t limit, bool count_only,
                             std::int64_t max_keys = kNoKeyBound);

// The current value of `key`, if it exists.
Result<std::optional<mvccpb::KeyValue>> ReadLatest(const StoreReader& reader, std::string_view key);

// The value `key` had at revision `rev` (its last write with main revision <= rev), if it existed
// then. Correct for any rev at or above the index's compact revision; below it, nullopt where
// compaction removed the answer.
Result<std::optional<mvccpb::KeyValue>> ReadKeyAt(const StoreReader& reader, std::string_view key,
                                                  Revision rev);

Status ParseKeyValue(std::string_view bytes, mvccpb::KeyValue* kv);
Status ParseStoredEvent(std::string_view bytes, v1::StoredEvent* ev);

}  // namespace epoch::server
