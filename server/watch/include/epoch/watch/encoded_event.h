// EncodedEvent: an mvccpb::Event serialized as a watcher receives it (prev_kv only if it asked),
// immutable and shared by every queued response that carries it. RoundEncoder serializes the
// events of one dispatch round at most once per form (with and without prev_kv), however many
// watchers take them, so fanning an event out to N watchers costs N pointer copies instead of N
// message copies and N serializations. AppendEncodedEvents writes them into a WatchResponse as
// its `events` field; the bytes on the wire are those of the same response built from messages.
//
// Who calls it: WatchHub (a RoundEncoder per dispatch round), WatchSession (history, queueing,
// writing).
//
// Threading: an EncodedEvent may be shared across threads (it never changes); a RoundEncoder is
// used by one thread at a time (the dispatch round, under the hub lock).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "etcdserverpb/rpc.pb.h"
#include "mvccpb/kv.pb.h"

namespace epoch::server {

using EncodedEvent = std::shared_ptr<const std::string>;

// `event` serialized, without its prev_kv unless `prev_kv`.
[[nodiscard]] EncodedEvent EncodeEvent(const mvccpb::Event& event, bool prev_kv);

// The serialized size of `events`: what a watcher's queue is bounded by.
[[nodiscard]] std::size_t EncodedBytes(const std::vector<EncodedEvent>& events);

// Appends `events`, in order, to the repeated `events` field of `response`. They go in as unknown
// fields with that field's number, which protobuf writes verbatim after the known fields: where
// the field would be written anyway (11 is WatchResponse's highest number), so any parser reads
// them as `events`. The response must carry no parsed events itself.
void AppendEncodedEvents(const std::vector<EncodedEvent>& events,
                         etcdserverpb::WatchResponse* response);

// The events of one revision, each encoded on first use in each form.
class RoundEncoder {
 public:
  // `events` must outlive the encoder.
  explicit RoundEncoder(const std::vector<mvccpb::Event>& events);
  // `event` is one of the round's events (an element of `events`).
  [[nodiscard]] const EncodedEvent& Encode(const mvccpb::Event* event, bool prev_kv);

 private:
  const std::vector<mvccpb::Event>& events_;
  std::vector<EncodedEvent> plain_;      // by index in events_; null until first asked
  std::vector<EncodedEvent> with_prev_;  // the same with prev_kv
};

}  // namespace epoch::server
