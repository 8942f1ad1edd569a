// Loopback networking for process-level tests: reserving ports that parallel test processes will
// not also pick, a one-shot HTTP GET (the metrics endpoint), and raw bytes written to a TCP port
// (a misbehaving peer).
//
// Port reservation: ports come in blocks of PortBlock::kPorts from [20000, 32000), below Linux's
// default ephemeral range (32768+) so outgoing connections never take them. A block is owned by
// holding flock() on /tmp/epoch-test-ports/<block>.lock (released by the kernel even when the
// test process is killed) and is used only if every port in it can be bound right now. The search
// starts at a block derived from the PID, so parallel ctest processes rarely even contend. A
// block stays reserved for the PortBlock's lifetime, so a restarted server gets its ports back.
//
// Threading: PortBlock is a plain owner of a file descriptor; HttpGet and SendRaw are
// self-contained blocking calls, safe from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "epoch/status.h"

namespace epoch::test {

class PortBlock {
 public:
  static constexpr int kPorts = 16;

  // Finds and reserves a free block; Unavailable if every block is taken.
  [[nodiscard]] static Result<PortBlock> Reserve();

  PortBlock() = default;
  PortBlock(PortBlock&& other) noexcept;
  PortBlock& operator=(PortBlock&& other) noexcept;
  PortBlock(const PortBlock&) = delete;
  PortBlock& operator=(const PortBlock&) = delete;
  ~PortBlock();

  // The i-th port of the block, 0 <= i < kPorts.
  [[nodiscard]] std::uint16_t port(int i) const;

 private:
  PortBlock(int lock_fd, std::uint16_t first) : lock_fd_(lock_fd), first_(first) {}

  int lock_fd_ = -1;  // holds the flock; -1 when empty
  std::uint16_t first_ = 0;
};

struct HttpResponse {
  int code = 0;
  std::string body;
};

// GET http://127.0.0.1:<port><path> (HTTP/1.0, one connection). Unavailable when the connection
// fails or no full response arrives within `timeout`.
[[nodiscard]] Result<HttpResponse> HttpGet(std::uint16_t port, std::string_view path,
                                           std::chrono::milliseconds timeout);

// Connects to 127.0.0.1:<port>, writes `bytes`, then waits up to `linger` for the peer to close
// the connection. Returns whether the peer closed it (true) or kept it open (false).
[[nodiscard]] Result<bool> SendRaw(std::uint16_t port, std::string_view bytes,
                                   std::chrono::milliseconds linger);

}  // namespace epoch::test
