// WriteTxn: the writes of one applied entry. All of them share one new main revision
// (begin + 1) and get sub-revisions 0, 1, ... in order (etcd-v3-wire.md §2c item 1); nothing
// changes the revision unless at least one key is written. Each write updates, in the pending
// batch: the revision record, the per-key history, the latest table and the lease attachments,
// and records the event (with prev_kv) for Watch. The revision record and the per-key history
// entry bypass the batch's index: reads through the pending batch see the latest table and the
// lease attachments of earlier writes, not their history (see ReadsHistory in entry_apply.h).
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
#include "mvccpb/kv.pb.h"
#include "store_reader.h"

namespace epoch::server {

// The bytes protobuf gives for v1::StoredEvent{type, kv}, built from the key-value's own encoding
// (so a put serializes its key-value once for the revision record and the latest table).
[[nodiscard]] std::string EncodeStoredEvent(mvccpb::Event::EventType type,
                                            std::string_view kv_bytes);

class WriteTxn {
 public:
  // `reader` must read through `batch`.
  WriteTxn(const StoreReader* reader, rocksdb::WriteBatchWithIndex* batch, Revision begin);

  [[nodiscard]] Revision begin() const { return begin_; }
  // The revision reads inside this entry see: begin, or begin + 1 once something was written.
  [[nodiscard]] Revision current() const { return changed() ? begin_.Next() : begin_; }
  [[nodiscard]] bool changed() const { return next_sub_ > 0; }

  // Writes key = value attached to `lease` (0: none) and returns the new key-value's
  // mod_revision. `prev` is the key's current value, if any (the caller has usually read it
  // already); it is moved into the recorded event once `value` has been copied, so `value` may
  // point into it and the caller must not use *prev afterwards.
  Result<std::int64_t> Put(std::string_view key, std::string_view value, LeaseId lease,
                           mvccpb::KeyValue* prev);
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
  const Revision begin_;
  std::int64_t next_sub_ = 0;
  std::vector<mvccpb::Event> events_;
};

}  // namespace epoch::server
