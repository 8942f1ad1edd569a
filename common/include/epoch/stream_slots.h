// StreamSlots: admission for one kind of long-lived stream or connection. At most `total` are
// open at once on this member and at most `per_address` from one remote address (the peer's IP,
// without its port), so one client machine cannot hold the member's memory and threads with
// thousands of idle or abusive streams while others still get theirs. A stream holds its slot
// (Slot, RAII) until it ends; a refused stream is counted by reason. Users: the lease keep-alive
// streams (server/lease) and the HTTP gateway's connections (server/gateway).
//
// Threading: thread-safe; a Slot may be released on any thread. The StreamSlots outlives its
// slots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "epoch/metrics_text.h"

namespace epoch {

class StreamSlots {
 public:
  enum class Refusal { kNone, kPerAddress, kTotal };

  class Slot {
   public:
    Slot(StreamSlots* owner, std::string address) : owner_(owner), address_(std::move(address)) {}
    ~Slot() { owner_->Release(address_); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    StreamSlots* owner_;
    std::string address_;
  };

  StreamSlots(std::size_t total, std::size_t per_address)
      : total_max_(total), per_address_max_(per_address) {}

  // A slot for a stream from `peer` (grpc::ServerContext::peer(): "ipv4:10.0.0.1:5000",
  // "ipv6:[::1]:5000", "unix:/path"), or null with the reason in *why.
  [[nodiscard]] std::unique_ptr<Slot> Acquire(std::string_view peer, Refusal* why);
  // The same for a remote address already without its port ("10.0.0.1", "::1").
  [[nodiscard]] std::unique_ptr<Slot> AcquireFor(std::string address, Refusal* why);

  // Gauge `<name>` (open streams) and counter `<name>_refused_total{reason}`.
  void RenderMetrics(MetricsText& m, const std::string& name, const std::string& what) const;

  [[nodiscard]] std::size_t open() const;
  [[nodiscard]] std::uint64_t refused(Refusal why) const;

  // The address part of a gRPC peer string: the host without the port.
  [[nodiscard]] static std::string AddressOf(std::string_view peer);

 private:
  void Release(const std::string& address);

  const std::size_t total_max_;
  const std::size_t per_address_max_;
  mutable std::mutex mu_;
  std::size_t open_ = 0;                        // guarded by mu_
  std::map<std::string, std::size_t> by_addr_;  // guarded by mu_; no zero counts
  std::uint64_t refused_per_address_ = 0;       // guarded by mu_
  std::uint64_t refused_total_ = 0;             // guarded by mu_
};

}  // namespace epoch
