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
// Nodes are slots: a member added at run time (chaos_cluster.h) takes the slot of the member it
// replaces, or an empty one. The cluster dials such a member at the peer URL it was added with,
// not through --peer-dial-override, so that URL is an *entry* of its slot (AddEntry): one
// listener every member dials, which reads the connection's hello (docs/formats.md §5.1: length
// 24, `EPOCHP1\n`, cluster ID, sender's member ID), finds the sender's slot by its member ID
// (SetMemberId) and then carries the connection as link (sender, slot), faults and all. A
// connection that opens with anything else (the join handshake, TLS) is carried unfaulted and
// counted (unattributed()).
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
  // Member `member_id` speaks for node `slot` (an entry attributes its hellos by this); a slot
  // keeps the IDs of its earlier members too.
  void SetMemberId(int slot, std::uint64_t member_id);
  // A new entry listener for node `to` (above); returns its port.
  [[nodiscard]] Result<std::uint16_t> AddEntry(int to);
  // Connections an entry could not attribute to a sender (carried without faults).
  [[nodiscard]] std::uint64_t unattributed() const;
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
