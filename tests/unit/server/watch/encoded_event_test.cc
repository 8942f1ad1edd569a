// Events serialized once per round (encoded_event.h): a response carrying them is byte for byte
// the response built from messages, prev_kv is kept only on request, and a round encodes each
// event once per form.
#include "epoch/watch/encoded_event.h"

#include <catch2/catch.hpp>

namespace epoch::server {
namespace {

mvccpb::Event MakeEvent(const std::string& key, std::int64_t revision, bool with_prev) {
  mvccpb::Event e;
  e.set_type(mvccpb::Event::PUT);
  mvccpb::KeyValue* kv = e.mutable_kv();
  kv->set_key(key);
  kv->set_value(std::string(300, 'v'));
  kv->set_create_revision(2);
  kv->set_mod_revision(revision);
  kv->set_version(3);
  if (with_prev) {
    mvccpb::KeyValue* prev = e.mutable_prev_kv();
    prev->set_key(key);
    prev->set_value("old");
    prev->set_mod_revision(revision - 1);
  }
  return e;
}

mvccpb::Event WithoutPrev(mvccpb::Event e) {
  e.clear_prev_kv();
  return e;
}

etcdserverpb::WatchResponse Header(bool fragment) {
  etcdserverpb::WatchResponse r;
  r.set_watch_id(42);
  r.mutable_header()->set_revision(9);
  r.mutable_header()->set_cluster_id(7);
  r.mutable_header()->set_raft_term(3);
  r.set_fragment(fragment);
  return r;
}

TEST_CASE("encoded events: a response is the same bytes as one built from messages", "[watch]") {
  const std::vector<mvccpb::Event> events{MakeEvent("a", 9, true), MakeEvent("b", 9, false),
                                          MakeEvent("c", 9, true)};
  const bool prev_kv = GENERATE(false, true);
  const bool fragment = GENERATE(false, true);
  CAPTURE(prev_kv, fragment);

  etcdserverpb::WatchResponse built = Header(fragment);
  std::vector<EncodedEvent> encoded;
  for (const mvccpb::Event& e : events) {
    *built.add_events() = prev_kv ? e : WithoutPrev(e);
    encoded.push_back(EncodeEvent(e, prev_kv));
  }
  etcdserverpb::WatchResponse sent = Header(fragment);
  AppendEncodedEvents(encoded, &sent);

  CHECK(sent.SerializeAsString() == built.SerializeAsString());
  CHECK(sent.ByteSizeLong() == built.ByteSizeLong());
  CHECK(EncodedBytes(encoded) == [&] {
    std::size_t n = 0;
    for (const auto& e : built.events()) n += e.ByteSizeLong();
    return n;
  }());
  etcdserverpb::WatchResponse parsed;
  REQUIRE(parsed.ParseFromString(sent.SerializeAsString()));
  REQUIRE(parsed.events_size() == 3);
  CHECK(parsed.events(0).has_prev_kv() == prev_kv);
  CHECK_FALSE(parsed.events(1).has_prev_kv());
  CHECK(parsed.events(2).kv().key() == "c");
  CHECK(parsed.GetReflection()->GetUnknownFields(parsed).empty());
}

TEST_CASE("encoded events: a round encodes each event once per form", "[watch]") {
  const std::vector<mvccpb::Event> events{MakeEvent("a", 5, true), MakeEvent("b", 5, false)};
  RoundEncoder round(events);
  const EncodedEvent& a_plain = round.Encode(&events[0], false);
  const EncodedEvent& a_prev = round.Encode(&events[0], true);
  CHECK(a_plain != a_prev);
  CHECK(round.Encode(&events[0], false) == a_plain);  // the same bytes, shared
  CHECK(round.Encode(&events[0], true) == a_prev);
  // Without a prev_kv in the event both forms are one encoding.
  CHECK(round.Encode(&events[1], true) == round.Encode(&events[1], false));

  mvccpb::Event parsed;
  REQUIRE(parsed.ParseFromString(*a_plain));
  CHECK_FALSE(parsed.has_prev_kv());
  CHECK(parsed.kv().key() == "a");
  REQUIRE(parsed.ParseFromString(*a_prev));
  CHECK(parsed.prev_kv().value() == "old");
}

}  // namespace
}  // namespace epoch::server
