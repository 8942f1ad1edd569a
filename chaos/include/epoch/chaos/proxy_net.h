// ProxyNet: one fault-injecting TCP proxy per directed peer link of an N-node cluster.
//
// epochd dials every peer to send it Raft traffic (one connection per direction per pair), so
// node `from` started with --peer-dial-override `to`=127.0.0.1:listen_port(from, to) reaches
// `to` only through the proxy of link (from, to). Faults are per directed link, which is enough
// for every partition shape: full (both directions of every link of a node), asymmetric (one
// direction), majorities ring, leader isolated from its peers while clients still reach it.
//
// Fault kinds (LinkFault):
//   pass  — bytes are forwarded as they arrive;
//   cut   — open connections are closed and new ones are closed on accept (the dialer retries);
//   delay — every chunk is forwarded `delay` after it was read, in order;
//   drop  — each chunk read is lost with `drop_probability`; TCP cannot lose bytes silently, so
//           the loss closes the connection (the frames in flight are lost, the dialer redials).
// A fault applies to both directions of the link's TCP connections.
//
// Threading: one internal I/O thread owns every socket. Set/HealAll/SetTarget may be called from
// any thread; they return once the I/O thread applied them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "epoch/status.h"

namespace epoch::chaos {

struct LinkFault {
  enum class Kind : std::uint8_t { kPass, kCut, kDelay, kDrop };
  Kind kind = Kind::kPass;
  std::chrono::milliseconds delay{0};  // kDelay
  double drop_probability = 0;         // kDrop, in (0, 1]

  static LinkFault Pass() { return {}; }
  static LinkFault Cut() { return {Kind::kCut, {}, 0}; }
  static LinkFault Delay(std::chrono::milliseconds d) { return {Kind::kDelay, d, 0}; }
  static LinkFault Drop(double p) { return {Kind::kDrop, {}, p}; }
};

class ProxyNet {
 public:
  // Listens on 127.0.0.1 (kernel-chosen ports) for every ordered pair of `nodes` nodes.
  [[nodiscard]] static Result<std::unique_ptr<ProxyNet>> Start(int nodes, std::uint64_t seed);
  ~ProxyNet();
  ProxyNet(const ProxyNet&) = delete;
  ProxyNet& operator=(const ProxyNet&) = delete;

  [[nodiscard]] int nodes() const;
  // The port node `from` dials to reach node `to`.
  [[nodiscard]] std::uint16_t listen_port(int from, int to) const;
  // Where node `to` accepts peer connections (set before its peers dial it).
  void SetTarget(int to, std::uint16_t peer_port);
  void Set(int from, int to, LinkFault fault);
  // Both directions between a and b.
  void SetPair(int a, int b, LinkFault fault) {
    Set(a, b, fault);
    Set(b, a, fault);
  }
  // Every link back to pass.
  void HealAll();
  // Connections accepted on link (from, to) so far: proves the node dials through the proxy.
  [[nodiscard]] std::uint64_t accepted(int from, int to) const;
  // Connections closed by cut or drop faults so far.
  [[nodiscard]] std::uint64_t connections_broken() const;

  class Impl;

 private:
  explicit ProxyNet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace epoch::chaos
