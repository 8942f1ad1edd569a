// go_json: etcdctl's JSON (Go's encoding/json over the gogo structs), field by field.
#include "go_json.h"

#include <catch2/catch.hpp>

#include "etcdserverpb/rpc.pb.h"

namespace epoch::ctl {
namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

TEST_CASE("go json: 64-bit numbers, zero fields omitted, bytes in base64", "[ctl][json]") {
  etcdserverpb::RangeResponse r;
  r.mutable_header()->set_cluster_id(14841639068965178418ULL);
  r.mutable_header()->set_revision(7);
  auto* kv = r.add_kvs();
  kv->set_key("foo");
  kv->set_value("ba");
  kv->set_version(1);
  r.set_count(1);
  CHECK(GoJson(r) == R"({"header":{"cluster_id":14841639068965178418,"revision":7},)"
                     R"("kvs":[{"key":"Zm9v","version":1,"value":"YmE="}],"count":1})");
  CHECK(GoJson(etcdserverpb::RangeResponse()) == "{}");
  etcdserverpb::PutResponse empty_header;
  empty_header.mutable_header();
  CHECK(GoJson(empty_header) == R"({"header":{}})");  // a set message shows, even when empty
}

TEST_CASE("go json: a oneof is its Go name holding the Go field name", "[ctl][json]") {
  etcdserverpb::TxnResponse r;
  r.set_succeeded(true);
  r.add_responses()->mutable_response_put()->mutable_header()->set_revision(3);
  r.add_responses()->mutable_response_delete_range();
  CHECK(GoJson(r) == R"({"succeeded":true,"responses":[{"Response":{"ResponsePut":)"
                     R"({"header":{"revision":3}}}},{"Response":{"ResponseDeleteRange":{}}}]})");
}

TEST_CASE("go json: enums as numbers, negative numbers", "[ctl][json]") {
  etcdserverpb::AlarmResponse r;
  auto* alarm = r.add_alarms();
  alarm->set_memberid(5);
  alarm->set_alarm(etcdserverpb::NOSPACE);
  CHECK(GoJson(r) == R"({"alarms":[{"memberID":5,"alarm":1}]})");
  etcdserverpb::LeaseTimeToLiveResponse ttl;
  ttl.set_ttl(-1);
  CHECK(GoJson(ttl) == R"({"TTL":-1})");
}

TEST_CASE("go json: strings escaped as Go escapes them", "[ctl][json]") {
  CHECK(GoJsonString("plain") == R"("plain")");
  CHECK(GoJsonString("a\"b\\c") == R"("a\"b\\c")");
  CHECK(GoJsonString("<a&b>") == R"("\u003ca\u0026b\u003e")");
  CHECK(GoJsonString("\n\r\t\b\x01") == R"("\n\r\t\u0008\u0001")");
  CHECK(GoJsonString("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // valid UTF-8 kept as is
  CHECK(GoJsonString("\xff"
                     "x") == R"("\ufffdx")");    // invalid bytes become U+FFFD
  CHECK(GoJsonString("\xc3") == R"("\ufffd")");  // a truncated sequence too
  CHECK(GoJsonString("\xe2\x80\xa8") == R"("\u2028")");
}

TEST_CASE("go json: base64 with padding", "[ctl][json]") {
  CHECK(GoJsonBytes("") == R"("")");
  CHECK(GoJsonBytes("f") == R"("Zg==")");
  CHECK(GoJsonBytes("fo") == R"("Zm8=")");
  CHECK(GoJsonBytes("foo") == R"("Zm9v")");
  CHECK(GoJsonBytes(std::string("\0\xff", 2)) == R"("AP8=")");
}

TEST_CASE("go json: wrapper objects embed the header's fields", "[ctl][json]") {
  etcdserverpb::ResponseHeader header;
  header.set_revision(4);
  CHECK(GoJsonObject().Embed(&header).Int("ID", 9).String("Error", "").Close() ==
        R"({"revision":4,"ID":9,"Error":""})");
  CHECK(GoJsonObject().Embed(nullptr).Int("ID", 9).Close() == R"({"ID":9})");
  CHECK(GoJsonObject().Raw("keys", "null").Bool("Canceled", false).Close() ==
        R"({"keys":null,"Canceled":false})");
}

TEST_CASE("go duration: the units and digits of time.Duration.String", "[ctl][json]") {
  CHECK(GoDuration(nanoseconds(0)) == "0s");
  CHECK(GoDuration(nanoseconds(999)) == "999ns");
  CHECK(GoDuration(microseconds(850)) == "850\xc2\xb5s");
  CHECK(GoDuration(nanoseconds(1'830'873)) == "1.830873ms");
  CHECK(GoDuration(microseconds(12'500)) == "12.5ms");
  CHECK(GoDuration(nanoseconds(2'500'000'000)) == "2.5s");
  CHECK(GoDuration(seconds(60)) == "1m0s");
  CHECK(GoDuration(seconds(3723)) == "1h2m3s");
}

}  // namespace
}  // namespace epoch::ctl
