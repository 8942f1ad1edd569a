#include "epoch/test_support/loopback.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace epoch::test {
namespace {

constexpr int kFirstPort = 20000;
constexpr int kBlocks = (32000 - kFirstPort) / PortBlock::kPorts;
constexpr const char* kLockDir = "/tmp/epoch-test-ports";

sockaddr_in Loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

// Whether a server could bind 127.0.0.1:<port> now (with SO_REUSEADDR, as epochd and gRPC do).
bool CanBind(std::uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = Loopback(port);
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

// A connected, blocking TCP socket to 127.0.0.1:<port> with send/receive timeouts, or -1.
int Connect(std::uint16_t port, std::chrono::milliseconds timeout) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr = Loopback(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

Result<PortBlock> PortBlock::Reserve() {
  mkdir(kLockDir, 01777);
  int start = static_cast<int>((static_cast<unsigned>(getpid()) * 2654435761U) % kBlocks);
  for (int k = 0; k < kBlocks; ++k) {
    int block = (start + k) % kBlocks;
    std::string path = fmt::format("{}/{}.lock", kLockDir, block);
    int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      close(fd);
      continue;
    }
    auto first = static_cast<std::uint16_t>(kFirstPort + block * kPorts);
    bool all_free = true;
    for (int i = 0; i < kPorts && all_free; ++i) {
      all_free = CanBind(static_cast<std::uint16_t>(first + i));
    }
    if (all_free) return PortBlock(fd, first);
    close(fd);
  }
  return Status::Unavailable("no free block of loopback ports in [20000, 32000)");
}

PortBlock::PortBlock(PortBlock&& other) noexcept
    : lock_fd_(std::exchange(other.lock_fd_, -1)), first_(other.first_) {}

PortBlock& PortBlock::operator=(PortBlock&& other) noexcept {
  if (this != &other) {
    if (lock_fd_ >= 0) close(lock_fd_);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
    first_ = other.first_;
  }
  return *this;
}

PortBlock::~PortBlock() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

std::uint16_t PortBlock::port(int i) const {
  if (lock_fd_ < 0 || i < 0 || i >= kPorts) std::abort();  // a test-harness bug, not a test failure
  return static_cast<std::uint16_t>(first_ + i);
}

Result<HttpResponse> HttpGet(std::uint16_t port, std::string_view path,
                             std::chrono::milliseconds timeout) {
  int fd = Connect(port, timeout);
  if (fd < 0) return Status::Unavailable(fmt::format("connect 127.0.0.1:{} failed", port));
  std::string request = fmt::format("GET {} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
  std::string raw;
  if (WriteAll(fd, request)) {
    char buf[8192];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) raw.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  std::size_t header_end = raw.find("\r\n\r\n");
  int code = 0;
  if (header_end == std::string::npos || std::sscanf(raw.c_str(), "HTTP/%*s %d", &code) != 1) {
    return Status::Unavailable(fmt::format("no HTTP response from 127.0.0.1:{}{}", port, path));
  }
  return HttpResponse{code, raw.substr(header_end + 4)};
}

Result<bool> SendRaw(std::uint16_t port, std::string_view bytes, std::chrono::milliseconds linger) {
  int fd = Connect(port, linger);
  if (fd < 0) return Status::Unavailable(fmt::format("connect 127.0.0.1:{} failed", port));
  // A write error means the peer already reset the connection.
  bool closed = !WriteAll(fd, bytes);
  auto deadline = std::chrono::steady_clock::now() + linger;
  while (!closed) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buf[256];
    closed = recv(fd, buf, sizeof(buf), 0) <= 0;  // EOF or reset; data (a reply) keeps reading
  }
  close(fd);
  return closed;
}

}  // namespace epoch::test
