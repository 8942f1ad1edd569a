#include "epoch/watch/encoded_event.h"

#include <cassert>

namespace epoch::server {

EncodedEvent EncodeEvent(const mvccpb::Event& event, bool prev_kv) {
  auto out = std::make_shared<std::string>();
  if (prev_kv || !event.has_prev_kv()) {
    event.SerializeToString(out.get());
  } else {
    mvccpb::Event without;
    without.set_type(event.type());
    *without.mutable_kv() = event.kv();
    without.SerializeToString(out.get());
  }
  return out;
}

std::size_t EncodedBytes(const std::vector<EncodedEvent>& events) {
  std::size_t bytes = 0;
  for (const EncodedEvent& e : events) bytes += e->size();
  return bytes;
}

void AppendEncodedEvents(const std::vector<EncodedEvent>& events,
                         etcdserverpb::WatchResponse* response) {
  assert(response->events_size() == 0);
  if (events.empty()) return;
  google::protobuf::UnknownFieldSet* fields =
      response->GetReflection()->MutableUnknownFields(response);
  for (const EncodedEvent& e : events) {
    fields->AddLengthDelimited(etcdserverpb::WatchResponse::kEventsFieldNumber, *e);
  }
}

RoundEncoder::RoundEncoder(const std::vector<mvccpb::Event>& events)
    : events_(events), plain_(events.size()), with_prev_(events.size()) {}

const EncodedEvent& RoundEncoder::Encode(const mvccpb::Event* event, bool prev_kv) {
  const auto i = static_cast<std::size_t>(event - events_.data());
  assert(i < events_.size());
  // Without a prev_kv in the event both forms are the same bytes.
  const bool with_prev = prev_kv && event->has_prev_kv();
  EncodedEvent& slot = with_prev ? with_prev_[i] : plain_[i];
  if (!slot) slot = EncodeEvent(*event, with_prev);
  return slot;
}

}  // namespace epoch::server
