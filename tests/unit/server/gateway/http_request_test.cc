// The gateway's HTTP/1 request heads.
#include "epoch/gateway/http_request.h"

#include <catch2/catch.hpp>

namespace epoch::gateway {
namespace {

TEST_CASE("a request head gives the method, path and the headers the gateway uses", "[gateway]") {
  Result<HttpRequestHead> head = ParseRequestHead(
      "POST /v3/kv/range?x=1 HTTP/1.1\r\nHost: a\r\ncontent-length: 15\r\n"
      "Authorization: abc.def\r\nExpect: 100-continue\r\n\r\n");
  REQUIRE(head.ok());
  CHECK(head->method == "POST");
  CHECK(head->path == "/v3/kv/range");
  CHECK(head->http11);
  CHECK_FALSE(head->close);
  CHECK(head->content_length == 15);
  CHECK(head->authorization == "abc.def");
  CHECK(head->expect_continue);
  CHECK_FALSE(head->chunked);

  head = ParseRequestHead("GET /version HTTP/1.0\r\n\r\n");
  REQUIRE(head.ok());
  CHECK_FALSE(head->http11);
  CHECK(head->close);  // HTTP/1.0 closes unless it asks for keep-alive
  head = ParseRequestHead("GET /version HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  REQUIRE(head.ok());
  CHECK_FALSE(head->close);
  head = ParseRequestHead(
      "POST /v3/watch HTTP/1.1\r\nConnection: close\r\n"
      "Transfer-Encoding: chunked\r\n\r\n");
  REQUIRE(head.ok());
  CHECK(head->close);
  CHECK(head->chunked);
}

TEST_CASE("a malformed request head is InvalidArgument", "[gateway]") {
  for (const char* text :
       {"POST\r\n\r\n", "POST /v3/kv/range HTTP/2.0\r\n\r\n", "POST v3 HTTP/1.1\r\n\r\n",
        "POST /v3 HTTP/1.1\r\nContent-Length: 12x\r\n\r\n",
        "POST /v3 HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST /v3 HTTP/1.1\r\nno colon\r\n\r\n"}) {
    INFO(text);
    CHECK(ParseRequestHead(text).status().code() == StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace epoch::gateway
