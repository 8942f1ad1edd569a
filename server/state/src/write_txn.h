// WriteTxn: the writes of one applied entry. All of them share one new main revision
// (begin + 1) and get sub-revisions 0, 1, ... in order (docs/etcd-compatibility.md §3.1); nothing
// changes the revision unless at least one key is written. Each write updates, in the pending
// batch: the revision record, the latest table and the lease attachments; stages the per-key
// history entry in the KeyIndex; and records the event (with prev_kv, unless lazy: see
// PreviousForPut) for Watch. The revision record bypasses the batch's index and the history
// entry is published with the batch: reads through the pending batch see the latest table and
// the lease attachments of earlier writes, not their history (see ReadsHistory in
// entry_apply.h).
//
// Thread-safety: applier thread only.
#pragma once

#include <rocksdb/utilities/write_batch_with_index.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "key_encoding.h"
#include "key_index.h"
#include "latest_cache.h"
#include "mvccpb/kv.pb.h"
#include "store_reader.h"

namespace epoch::server {

// The bytes protobuf gives for v1::StoredEvent{type, kv}, built from the key-value's own encoding
// (so a put serializes its key-value once for the revision record and the latest table).
[[nodiscard]] std::string EncodeStoredEvent(mvccpb::Event::EventType type,
                                            std::string_view kv_bytes);

class WriteTxn {
 public:
  // `reader` must read through `batch`. `latest` (may be null) is kept in step with the latest
  // table this txn writes; `prev_values`: PUT events must carry the previous value.
  // `index` receives the per-key history of the writes (staged until the batch is published).
  WriteTxn(const StoreReader* reader, rocksdb::WriteBatchWithIndex* batch, KeyIndex* index,
           Revision begin, LatestCache* latest = nullptr, bool prev_values = true);

  [[nodiscard]] Revision begin() const { return begin_; }
  // The revision reads inside this entry see: begin, or begin + 1 once something was written.
  [[nodiscard]] Revision current() const { return changed() ? begin_.Next() : begin_; }
  [[nodiscard]] bool changed() const { return next_sub_ > 0; }

  // The key's latest version, for a Put of it. Read whole from the latest table when
  // `need_value` or when events must carry previous values; otherwise its metadata may come from
  // the cache, with an empty value (*value_known = false). nullopt: no live version.
  Result<std::optional<mvccpb::KeyValue>> PreviousForPut(std::string_view key, bool need_value,
                                                         bool* value_known);

  // Writes key = value attached to `lease` (0: none) and returns the new key-value's
  // mod_revision. `prev` is the key's current version, if any (from PreviousForPut); if
  // `prev_value_known` it is moved into the recorded event (as prev_kv) once `value` has been
  // copied, so `value` may point into it and the caller must not use *prev afterwards. If not,
  // the event carries no prev_kv.
  Result<std::int64_t> Put(std::string_view key, std::string_view value, LeaseId lease,
                           mvccpb::KeyValue* prev, bool prev_value_known = true);
  // Deletes every live key in `range`; returns the deleted key-values in key order.
  Result<std::vector<mvccpb::KeyValue>> DeleteRange(const KeyRange& range);

  [[nodiscard]] const std::vector<mvccpb::Event>& events() const { return events_; }
  std::vector<mvccpb::Event> TakeEvents() { return std::move(events_); }

 private:
  RevisionPair NextPair() { return RevisionPair{begin_.value() + 1, next_sub_++}; }
  // The revision record (a v1::StoredEvent whose kv is `kv_bytes`) and the key's index entry.
  Status WriteRecord(RevisionPair pair, mvccpb::Event::EventType type, std::string_view key,
                     std::string_view kv_bytes);
  Status Rocks(const rocksdb::Status& s) { return FromRocks(s, "write batch"); }

  const StoreReader* reader_;
  rocksdb::WriteBatchWithIndex* batch_;
  KeyIndex* const index_;
  const Revision begin_;
  LatestCache* const latest_;
  const bool prev_values_;
  std::int64_t next_sub_ = 0;
  std::vector<mvccpb::Event> events_;
};

}  // namespace epoch::server
