// PeerTransport: the node-to-node link for Raft messages over TCP (Asio).
//
// Who calls it: the Raft driver (RaftDriver) sends frames with Send(); frames received from
// peers are handed to the FrameHandler. The transport knows nothing of Raft: a frame is an opaque
// byte string (an encoded raftpb message).
//
// Limits (PeerTransportOptions): a hello within `hello_timeout`, a frame no larger than
// `max_frame_bytes` (checked on its length prefix, before any buffer grows for it) and complete
// within `frame_read_timeout`, at most `max_inbound_connections` inbound connections and
// `max_inbound_per_address` from one address; accept() errors back off. Each refusal is counted
// in PeerDrops.
//
// Wire: every frame is a 4-byte big-endian length followed by that many bytes. The first frame on
// a connection is a hello (cluster id + sender id) so the receiver knows who is talking. There is
// one connection per direction per peer: this node dials each peer to send and accepts the
// peer's own connection to receive. Frames are pipelined (many queued frames leave in one gathered
// write). A broken or refused connection is redialled with exponential backoff and full jitter;
// frames queued beyond `max_queue_bytes` while a peer is unreachable are dropped (Raft tolerates
// loss, and the driver is told through `on_unreachable` so the core stops pipelining to it).
// Peers may be dialled through a fault-injecting proxy: the address in PeerAddress is simply
// where to connect.
//
// TLS (PeerTransportOptions::tls): the handshake runs inside the hello deadline; the certificate
// checks (allowed CN/hostname, the member the certificate names) run before any frame is handed
// on. Refusals are counted as `tls_handshake`, `cert_not_allowed`, `cert_member_mismatch`.
//
// Threading: all socket work runs on the io_context given at construction (run by one or more
// threads). Send(), SetPeer(), RemovePeer() and Stop() are thread-safe. Handlers are invoked on the
// io_context's threads.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "epoch/peer/peer_drops.h"
#include "epoch/peer/peer_tls.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

struct PeerAddress {
  std::string host;
  std::uint16_t port = 0;
};

struct PeerTransportOptions {
  NodeId self;
  std::uint64_t cluster_id = 0;
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 0;  // 0 = pick a free port (tests); see PeerTransport::port()
  std::uint32_t max_frame_bytes = 64U << 20;
  std::uint64_t max_queue_bytes = 64U << 20;
  std::uint32_t reconnect_min_ms = 10;
  // Redials of a dead or cut-off peer stay cheap (one refused connect) at this cap, and a healed
  // link is back within 1.5 x the cap even when the peer does not dial us first (when it does,
  // we redial at once: see PeerAlive).
  std::uint32_t reconnect_max_ms = 250;
  // An accepted connection must send its hello within this time, and its first frame must be
  // exactly a hello: a port scanner or a stuck client cannot hold a connection or make us
  // allocate a large frame buffer before it has identified itself.
  std::chrono::milliseconds hello_timeout{5000};
  // If set, a hello from a node for which this returns false is rejected (not a member).
  std::function<bool(NodeId)> accept_peer;
  // A frame whose first bytes arrived must be complete within this time, or the connection is
  // closed: a peer cannot hold a connection (and its buffer) with a frame it never finishes.
  // The buffer grows with the bytes received, never to the announced size at once.
  std::chrono::milliseconds frame_read_timeout{30'000};
  // Inbound connections accepted at once, in total and from one remote address; beyond them a
  // new connection is closed as soon as it is accepted (counted). A member holds one.
  std::size_t max_inbound_connections = 256;
  std::size_t max_inbound_per_address = 32;
  // After a failed accept() (EMFILE, ENFILE, ENOBUFS, ...), the listener waits this long before
  // accepting again instead of spinning.
  std::chrono::milliseconds accept_error_backoff{100};
  // Where refused connections and dropped frames are counted (optional).
  PeerDrops* drops = nullptr;
  // Peer TLS (optional): every accepted and dialled connection runs a TLS handshake before its
  // hello; one that fails it (a plaintext peer, an untrusted certificate) is closed and counted.
  std::shared_ptr<PeerTls> tls;
  // A member's name (as in --initial-cluster, or as it published it); empty when not known yet (a
  // member added at runtime that has not started). When `tls` verifies peers, a dialled peer's
  // certificate must name the member dialled, and with client-cert-auth an accepted connection's
  // certificate must name the member its hello names (PeerTls, CertificateNamesMember). For a
  // member whose name is not known, the certificate must name none of `member_names`: no member
  // can pose as a new one with its own certificate. A join request's certificate must name the
  // name it asks to join under.
  std::function<std::string(NodeId)> member_name;
  // The names of every known member, this one included.
  std::function<std::vector<std::string>()> member_names;
  // Answers a join handshake (peer_join.h): the serialized raftpb.JoinResponse for a new member.
  // Runs on the transport's thread; must not block. Unset: join requests are refused as bad
  // hellos.
  std::function<std::string(const raftpb::JoinRequest&)> answer_join;
};

struct PeerLinkStats {
  std::uint64_t frames_sent = 0;
  std::uint64_t frames_dropped = 0;
  std::uint64_t connects = 0;
  std::uint64_t connect_failures = 0;
  bool connected = false;
};

class PeerTransport {
 public:
  using FrameHandler = std::function<void(NodeId from, std::string frame)>;
  using UnreachableHandler = std::function<void(NodeId peer)>;
  // Called (on the transport's threads, or inside Send) when a frame is dropped before any byte
  // of it reached the socket: the peer certainly never got it.
  using NotSentHandler = std::function<void()>;

  PeerTransport(asio::io_context& io, PeerTransportOptions options, FrameHandler on_frame,
                UnreachableHandler on_unreachable);
  ~PeerTransport();
  PeerTransport(const PeerTransport&) = delete;
  PeerTransport& operator=(const PeerTransport&) = delete;

  // Binds and starts accepting. Fails with a clear message if the address is taken.
  [[nodiscard]] Status Start();
  // Closes every connection and the listener; pending frames are dropped. Idempotent.
  void Stop();

  // The bound listening port (after Start()).
  [[nodiscard]] std::uint16_t port() const { return bound_port_.load(); }

  // Adds or re-addresses a peer (a changed address closes the old connection).
  void SetPeer(NodeId peer, PeerAddress address);
  void RemovePeer(NodeId peer);
  // Queues a frame for `peer`; never blocks. Unknown peers and oversized frames are dropped.
  // `not_sent`, if given, is called if the frame is dropped before it reached the socket (unknown
  // peer, oversized, queue full, or the connection failed while it was still queued).
  void Send(NodeId peer, std::string frame, NotSentHandler not_sent = {});

  [[nodiscard]] PeerLinkStats Stats(NodeId peer) const;

 private:
  class Outbound;
  class Inbound;

  void Accept();
  void AcceptLater();
  // Admits an accepted connection from `address` under the caps, or says why not.
  [[nodiscard]] std::optional<ConnectionRefusal> Admit(const asio::ip::address& address);
  void Count(FrameDrop reason) const;
  void Count(ConnectionRefusal reason) const;
  // `cert` names member `id` (PeerTransportOptions::member_name).
  [[nodiscard]] bool CertificateMatches(X509* cert, NodeId id) const;
  // A peer identified itself on an inbound connection: redial it now if we were backing off.
  void PeerAlive(NodeId peer);

  asio::io_context& io_;
  const PeerTransportOptions options_;
  FrameHandler on_frame_;
  UnreachableHandler on_unreachable_;
  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer accept_backoff_;
  std::atomic<std::uint16_t> bound_port_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<std::uint64_t> refusals_logged_{0};

  mutable std::mutex mu_;
  std::map<NodeId, std::shared_ptr<Outbound>> outbound_;          // guarded by mu_
  std::map<Inbound*, std::weak_ptr<Inbound>> inbound_;            // guarded by mu_
  std::map<asio::ip::address, std::size_t> inbound_per_address_;  // guarded by mu_
};

}  // namespace epoch::server
