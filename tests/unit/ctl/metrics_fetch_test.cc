// check datascale's reading of /metrics (metrics_fetch.h): the resident memory line and the HTTP
// response framing.
#include "metrics_fetch.h"

#include <catch2/catch.hpp>

namespace epoch::ctl {
namespace {

TEST_CASE("datascale: process_resident_memory_bytes from a /metrics body", "[ctl]") {
  const std::string body =
      "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
      "# TYPE process_resident_memory_bytes gauge\n"
      "process_resident_memory_bytes 5.0331648e+07\n"
      "process_virtual_memory_bytes 1e+09\n";
  Result<double> bytes = ResidentMemoryBytes(body);
  REQUIRE(bytes.ok());
  CHECK(*bytes == 50331648.0);
  CHECK(ResidentMemoryBytes("up 1\n").status().message() ==
        "could not find: process_resident_memory_bytes");
  CHECK(ResidentMemoryBytes("process_resident_memory_bytes x1\n").status().message() ==
        "parse error: strconv.ParseFloat: parsing \"x1\": invalid syntax");
}

TEST_CASE("datascale: the body of an HTTP response", "[ctl]") {
  Result<std::string> body = HttpResponseBody("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcdef");
  REQUIRE(body.ok());
  CHECK(*body == "abc");
  body = HttpResponseBody(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nproc\r\n3\r\ness\r\n0\r\n\r\n");
  REQUIRE(body.ok());
  CHECK(*body == "process");
  body = HttpResponseBody("HTTP/1.0 200 OK\r\n\r\nto the end");
  REQUIRE(body.ok());
  CHECK(*body == "to the end");
  CHECK_FALSE(HttpResponseBody("HTTP/1.1 200 OK\r\n").ok());
}

TEST_CASE("datascale: an endpoint that refuses the connection is a fetch error", "[ctl]") {
  // Port 1 on loopback: nothing listens there.
  Result<double> bytes = FetchResidentMemoryBytes("127.0.0.1:1", std::chrono::seconds(5));
  REQUIRE_FALSE(bytes.ok());
  CHECK(bytes.status().message() ==
        "fetch error: Get \"http://127.0.0.1:1/metrics\": dial tcp 127.0.0.1:1: connect: "
        "connection refused");
}

}  // namespace
}  // namespace epoch::ctl
