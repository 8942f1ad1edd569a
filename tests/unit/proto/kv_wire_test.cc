// Wire compatibility checks: our hand-written .proto files must produce exactly the bytes etcd's
// do. Each field's tag byte is (field_number << 3 | wire_type), so a wrong field number changes it.
#include <catch2/catch.hpp>
#include <string>

#include "mvccpb/kv.pb.h"

namespace {

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

TEST_CASE("mvccpb.KeyValue uses etcd's field numbers", "[proto]") {
  mvccpb::KeyValue kv;
  kv.set_key("k");
  kv.set_create_revision(2);
  kv.set_mod_revision(3);
  kv.set_version(4);
  kv.set_value("v");
  kv.set_lease(6);
  // key=1 (0a), create_revision=2 (10), mod_revision=3 (18), version=4 (20), value=5 (2a),
  // lease=6 (30)
  CHECK(Hex(kv.SerializeAsString()) ==
        "0a016b1002180320042a017630"
        "06");
}

TEST_CASE("mvccpb.Event round-trips with prev_kv", "[proto]") {
  mvccpb::Event ev;
  ev.set_type(mvccpb::Event::DELETE);
  ev.mutable_kv()->set_key("a");
  ev.mutable_kv()->set_mod_revision(9);
  ev.mutable_prev_kv()->set_key("a");
  ev.mutable_prev_kv()->set_value("old");
  std::string wire = ev.SerializeAsString();
  CHECK(Hex(wire).rfind("0801", 0) == 0);  // type=1 (DELETE) first

  mvccpb::Event back;
  REQUIRE(back.ParseFromString(wire));
  CHECK(back.type() == mvccpb::Event::DELETE);
  CHECK(back.kv().mod_revision() == 9);
  CHECK(back.prev_kv().value() == "old");
}

}  // namespace
