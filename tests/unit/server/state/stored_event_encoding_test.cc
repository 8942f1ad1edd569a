// EncodeStoredEvent must give exactly the bytes protobuf gives for the same v1::StoredEvent: the
// revision records are compared across members (state hashes) and parsed by the readers.
#include <catch2/catch.hpp>

#include "epoch/v1/internal.pb.h"
#include "write_txn.h"

namespace epoch::server {
namespace {

mvccpb::KeyValue Kv(std::size_t value_bytes) {
  mvccpb::KeyValue kv;
  kv.set_key("some/key");
  kv.set_value(std::string(value_bytes, 'v'));
  kv.set_create_revision(3);
  kv.set_mod_revision(1LL << 40);
  kv.set_version(7);
  kv.set_lease(0x1234567890);
  return kv;
}

TEST_CASE("stored event encoding equals protobuf's for puts and deletes", "[store]") {
  // Value sizes around the one- and two-byte length varint boundaries, and a large one.
  for (std::size_t size : {0UL, 1UL, 100UL, 127UL, 128UL, 16383UL, 16384UL, 1UL << 20}) {
    for (auto type : {mvccpb::Event::PUT, mvccpb::Event::DELETE}) {
      mvccpb::KeyValue kv = Kv(size);
      v1::StoredEvent event;
      event.set_type(type);
      *event.mutable_kv() = kv;
      const std::string encoded = EncodeStoredEvent(type, kv.SerializeAsString());
      CHECK(encoded == event.SerializeAsString());
      v1::StoredEvent parsed;
      REQUIRE(parsed.ParseFromString(encoded));
      CHECK(parsed.type() == type);
      CHECK(parsed.kv().value().size() == size);
    }
  }
}

}  // namespace
}  // namespace epoch::server
