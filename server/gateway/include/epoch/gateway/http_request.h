// An HTTP/1.x request head as the gateway reads it: the request line and the headers it acts on.
// Header names are matched case-insensitively; a request with Transfer-Encoding (a chunked body)
// is refused by the server (411), as is a body longer than its bound (413). Also the one way the
// gateway writes a whole answer (HttpResponse) and its reason phrases.
//
// Threading: pure functions, any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::gateway {

struct HttpRequestHead {
  std::string method;   // "POST"
  std::string path;     // "/v3/kv/range", the query string removed
  bool http11 = false;  // HTTP/1.1 (persistent by default) rather than HTTP/1.0
  std::uint64_t content_length = 0;
  bool chunked = false;  // Transfer-Encoding present
  bool expect_continue = false;
  bool close = false;         // the connection ends after this request
  std::string authorization;  // the Authorization header's value: the auth token, as etcd reads it
};

// Parses the head (request line and headers, up to and including the empty line).
// InvalidArgument for a malformed request line, header or Content-Length.
[[nodiscard]] Result<HttpRequestHead> ParseRequestHead(std::string_view head);

// The reason phrase of an HTTP status the gateway answers with ("Internal Server Error" for
// codes it does not use).
[[nodiscard]] const char* HttpReason(int code);

// A whole HTTP/1.`minor` answer: status line, Content-Type, Content-Length, `headers` (each line
// ending in CRLF), a blank line and `body`.
[[nodiscard]] std::string HttpResponse(int minor, int code, std::string_view content_type,
                                       std::string_view headers, std::string_view body);

}  // namespace epoch::gateway
