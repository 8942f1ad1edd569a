#include "epoch/gateway/http_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>

namespace epoch::gateway {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The next line of `rest` (without its CRLF or LF), removed from `rest`.
std::string_view NextLine(std::string_view* rest) {
  const std::size_t end = rest->find('\n');
  std::string_view line = rest->substr(0, end);
  rest->remove_prefix(end == std::string_view::npos ? rest->size() : end + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

Status ParseRequestLine(std::string_view line, HttpRequestHead* head) {
  const std::size_t a = line.find(' ');
  const std::size_t b = line.rfind(' ');
  if (a == std::string_view::npos || b == a) {
    return Status::InvalidArgument("malformed request line");
  }
  head->method = std::string(line.substr(0, a));
  std::string_view target = line.substr(a + 1, b - a - 1);
  const std::string_view version = line.substr(b + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return Status::InvalidArgument("unsupported HTTP version");
  }
  head->http11 = version == "HTTP/1.1";
  head->close = !head->http11;
  target = target.substr(0, target.find('?'));
  if (target.empty() || target.front() != '/') {
    return Status::InvalidArgument("malformed request target");
  }
  head->path = std::string(target);
  return Status::Ok();
}

Status ApplyHeader(std::string_view name, std::string_view value, HttpRequestHead* head) {
  const std::string key = Lower(name);
  if (key == "content-length") {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec != std::errc{} || end != value.data() + value.size()) {
      return Status::InvalidArgument("malformed Content-Length");
    }
    head->content_length = n;
  } else if (key == "transfer-encoding") {
    head->chunked = true;
  } else if (key == "expect") {
    head->expect_continue = Lower(value) == "100-continue";
  } else if (key == "connection") {
    const std::string v = Lower(value);
    if (v == "close") head->close = true;
    if (v == "keep-alive") head->close = false;
  } else if (key == "authorization") {
    head->authorization = std::string(value);
  }
  return Status::Ok();
}

}  // namespace

Result<HttpRequestHead> ParseRequestHead(std::string_view text) {
  HttpRequestHead head;
  std::string_view rest = text;
  EPOCH_RETURN_IF_ERROR(ParseRequestLine(NextLine(&rest), &head));
  while (!rest.empty()) {
    const std::string_view line = NextLine(&rest);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Status::InvalidArgument("malformed header line");
    }
    EPOCH_RETURN_IF_ERROR(ApplyHeader(line.substr(0, colon), Trim(line.substr(colon + 1)), &head));
  }
  return head;
}

const char* HttpReason(int code) {
  switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Internal Server Error";
  }
}

std::string HttpResponse(int minor, int code, std::string_view content_type,
                         std::string_view headers, std::string_view body) {
  return fmt::format("HTTP/1.{} {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}\r\n{}", minor,
                     code, HttpReason(code), content_type, body.size(), headers, body);
}

}  // namespace epoch::gateway
