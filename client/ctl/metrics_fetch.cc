// process_resident_memory_bytes from /metrics (see metrics_fetch.h).
#include "metrics_fetch.h"

#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace epoch::ctl {
namespace {

constexpr std::string_view kResidentMemory = "process_resident_memory_bytes";

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Go's errno text: strerror's words, lower case first.
std::string ErrnoText(int error) {
  std::string text = std::strerror(error);
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// A connected socket to host:port within `timeout`; errno's text on failure.
Result<int> Connect(const std::string& host, const std::string& port,
                    std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Status::Unavailable(fmt::format("lookup {}: {}", host, gai_strerror(rc)));
  }
  int error = ECONNREFUSED;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      socklen_t len = sizeof(error);
      if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
        error = ETIMEDOUT;
      } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) {
        error = errno;
      }
    } else {
      error = errno;
    }
    if (error != 0 && error != EISCONN) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Status::Unavailable(fmt::format("connect: {}", ErrnoText(error)));
  return fd;
}

// Writes the request and reads the response until the server closes the connection.
Result<std::string> Exchange(int fd, const std::string& request,
                             std::chrono::milliseconds timeout) {
  std::size_t sent = 0;
  while (sent < request.size()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
      return Status::Timeout("i/o timeout");
    }
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return Status::Unavailable(fmt::format("write: {}", ErrnoText(errno)));
    }
    if (n > 0) sent += static_cast<std::size_t>(n);
  }
  std::string response;
  char chunk[16384];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
      return Status::Timeout("i/o timeout");
    }
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n == 0) return response;
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return Status::Unavailable(fmt::format("read: {}", ErrnoText(errno)));
    }
    if (n > 0) response.append(chunk, static_cast<std::size_t>(n));
  }
}

}  // namespace

Result<double> ResidentMemoryBytes(const std::string& body) {
  std::string_view rest = body;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    if (!line.starts_with(kResidentMemory)) continue;
    std::string value(line.substr(kResidentMemory.size()));
    const std::size_t first = value.find_first_not_of(" \t\r");
    const std::size_t last = value.find_last_not_of(" \t\r");
    value = first == std::string::npos ? "" : value.substr(first, last - first + 1);
    if (value.empty()) break;
    char* parsed_end = nullptr;
    const double bytes = std::strtod(value.c_str(), &parsed_end);
    if (parsed_end != value.c_str() + value.size()) {
      return Status::InvalidArgument(
          fmt::format("parse error: strconv.ParseFloat: parsing \"{}\": invalid syntax", value));
    }
    return bytes;
  }
  return Status::NotFound(fmt::format("could not find: {}", kResidentMemory));
}

Result<std::string> HttpResponseBody(const std::string& response) {
  const std::size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return Status::InvalidArgument("malformed HTTP response");
  }
  const std::string headers = Lower(response.substr(0, header_end));
  std::string body = response.substr(header_end + 4);
  if (headers.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    std::string decoded;
    std::size_t at = 0;
    while (true) {
      const std::size_t line_end = body.find("\r\n", at);
      if (line_end == std::string::npos) return Status::InvalidArgument("malformed chunk");
      const std::size_t size = std::strtoul(body.c_str() + at, nullptr, 16);
      if (size == 0) return decoded;
      if (line_end + 2 + size > body.size()) return Status::InvalidArgument("truncated chunk");
      decoded.append(body, line_end + 2, size);
      at = line_end + 2 + size + 2;
    }
  }
  const std::size_t length_at = headers.find("\r\ncontent-length:");
  if (length_at != std::string::npos) {
    const std::size_t length = std::strtoul(headers.c_str() + length_at + 17, nullptr, 10);
    if (length < body.size()) body.resize(length);
  }
  return body;
}

Result<double> FetchResidentMemoryBytes(const std::string& endpoint,
                                        std::chrono::milliseconds timeout) {
  std::string host_port = endpoint;
  if (host_port.starts_with("http://")) host_port = host_port.substr(7);
  const std::string url = "http://" + host_port + "/metrics";
  const auto fetch_error = [&url](const std::string& why) {
    return Status::Unavailable(fmt::format("fetch error: Get \"{}\": {}", url, why));
  };
  if (host_port.starts_with("https://")) {
    return fetch_error("epochctl reads /metrics over plain HTTP only");
  }
  if (const std::size_t slash = host_port.find('/'); slash != std::string::npos) {
    host_port.resize(slash);
  }
  const std::size_t colon = host_port.rfind(':');
  std::string host = colon == std::string::npos ? host_port : host_port.substr(0, colon);
  const std::string port = colon == std::string::npos ? "80" : host_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  Result<int> fd = Connect(host, port, timeout);
  if (!fd.ok())
    return fetch_error(fmt::format("dial tcp {}: {}", host_port, fd.status().message()));
  Result<std::string> response =
      Exchange(*fd,
               fmt::format("GET /metrics HTTP/1.1\r\nHost: {}\r\nUser-Agent: epochctl\r\n"
                           "Connection: close\r\n\r\n",
                           host_port),
               timeout);
  close(*fd);
  if (!response.ok()) return fetch_error(std::string(response.status().message()));
  Result<std::string> body = HttpResponseBody(*response);
  if (!body.ok()) return fetch_error(std::string(body.status().message()));
  return ResidentMemoryBytes(*body);
}

}  // namespace epoch::ctl
