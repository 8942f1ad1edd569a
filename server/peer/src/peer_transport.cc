#include "epoch/peer/peer_transport.h"

#include <openssl/ssl.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

#include "epoch/byte_coding.h"
#include "epoch/peer/peer_join.h"

namespace epoch::server {
namespace {

using asio::ip::tcp;
using TlsStream = asio::ssl::stream<tcp::socket&>;

constexpr std::string_view kHelloMagic = "EPOCHP1\n";
constexpr std::size_t kHelloBytes = kHelloMagic.size() + 16;
// Frames gathered into one write: bounded so one slow write cannot hold too much memory.
constexpr std::size_t kMaxGatherFrames = 256;
// Bytes an inbound connection asks the socket for at a time (more when a frame is larger).
constexpr std::size_t kReadChunk = 64 << 10;
// Free space every read gets at least: below it the unparsed tail moves to the front first, and
// the buffer grows if that is not enough.
constexpr std::size_t kMinReadSpace = kReadChunk / 4;

// A frame ready for the wire: length prefix + payload in one buffer.
std::string Framed(std::string_view payload) {
  std::string out;
  out.reserve(4 + payload.size());
  PutBigEndian32(&out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string Hello(std::uint64_t cluster_id, NodeId self) {
  std::string hello(kHelloMagic);
  PutBigEndian64(&hello, cluster_id);
  PutBigEndian64(&hello, self.value());
  return Framed(hello);
}

}  // namespace

// One outgoing connection to one peer. All state is touched only on strand_.
class PeerTransport::Outbound : public std::enable_shared_from_this<Outbound> {
 public:
  Outbound(asio::io_context& io, PeerTransport& owner, NodeId peer, PeerAddress address)
      : owner_(owner),
        peer_(peer),
        address_(std::move(address)),
        strand_(asio::make_strand(io)),
        socket_(strand_),
        resolver_(strand_),
        timer_(strand_),
        handshake_timer_(strand_),
        rng_(owner.options_.self.value() * 7919 + peer.value()) {}

  void Start() {
    asio::post(strand_, [self = shared_from_this()] { self->Connect(); });
  }

  void Enqueue(std::string frame, NotSentHandler not_sent) {
    asio::post(strand_, [self = shared_from_this(), frame = std::move(frame),
                         not_sent = std::move(not_sent)]() mutable {
      self->EnqueueOnStrand(std::move(frame), std::move(not_sent));
    });
  }

  void Close() {
    asio::post(strand_, [self = shared_from_this()] {
      self->closed_ = true;
      self->Reset();
      self->timer_.cancel();
      self->handshake_timer_.cancel();
      self->resolver_.cancel();
    });
  }

  PeerLinkStats Stats() const {
    std::lock_guard lock(stats_mu_);
    return stats_;
  }

  // The peer is alive: it just identified itself on a connection it opened to us. If we are
  // waiting out a redial backoff (grown while it was dead or cut off), dial now. Without this a
  // restarted or healed peer stayed unreachable for up to reconnect_max_ms x 1.5 — in chaos runs
  // the pre-vote between the two survivors of a leader kill was lost to exactly that.
  void Nudge() {
    asio::post(strand_, [self = shared_from_this()] {
      if (self->closed_ || self->connected_ || !self->waiting_) return;
      self->attempt_ = 0;
      self->waiting_ = false;
      ++self->wait_generation_;  // the pending timer handler, if already queued, does nothing
      self->timer_.cancel();
      self->Connect();
    });
  }

 private:
  // With peer TLS, the certificate the dialled peer presented names the member dialled (when
  // certificates are verified at all).
  bool ServerCertificateMatches() const {
    const PeerTls& tls = *owner_.options_.tls;
    if (!tls.verifies_peers()) return true;
    X509Ptr cert(SSL_get1_peer_certificate(tls_->native_handle()));
    return owner_.CertificateMatches(cert.get(), peer_);
  }

  void EnqueueOnStrand(std::string frame, NotSentHandler not_sent) {
    const auto& opts = owner_.options_;
    if (closed_ || queued_bytes_ + frame.size() > opts.max_queue_bytes) {
      Count([](PeerLinkStats& s) { ++s.frames_dropped; });
      if (not_sent) not_sent();
      return;
    }
    queued_bytes_ += frame.size();
    queue_.push_back({Framed(frame), frame.size(), std::move(not_sent)});
    MaybeWrite();
  }

  void Connect() {
    if (closed_) return;
    resolver_.async_resolve(
        address_.host, std::to_string(address_.port),
        [self = shared_from_this()](std::error_code ec, tcp::resolver::results_type results) {
          if (ec) return self->Fail("resolve", ec);
          asio::async_connect(self->socket_, results,
                              [self](std::error_code cec, const tcp::endpoint&) {
                                if (cec) return self->Fail("connect", cec);
                                self->OnTcpConnected();
                              });
        });
  }

  // With peer TLS, the handshake (the peer's certificate checked) comes before the hello.
  void OnTcpConnected() {
    if (closed_) return Reset();
    if (!owner_.options_.tls) return OnConnected();
    // A new stream per connection: an SSL object is not reused after its connection ends. The
    // previous stream's operations completed on this strand when its socket was closed.
    tls_ = std::make_unique<TlsStream>(socket_, owner_.options_.tls->client_context());
    tls_->async_handshake(
        asio::ssl::stream_base::client,
        [self = shared_from_this(), generation = generation_](std::error_code ec) {
          if (generation != self->generation_) return;
          self->handshake_timer_.cancel();
          if (ec) return self->HandshakeFailed(ec);
          if (!self->ServerCertificateMatches()) {
            spdlog::warn(
                "transport: node={:x} peer={:x} presented a certificate that does not name "
                "that member",
                self->owner_.options_.self, self->peer_);
            self->owner_.Count(ConnectionRefusal::kCertMemberMismatch);
            return self->Fail("certificate check", asio::error::access_denied);
          }
          self->OnConnected();
        });
    // A peer that accepts and never completes the handshake is redialled, not waited on forever.
    handshake_timer_.expires_after(owner_.options_.hello_timeout);
    handshake_timer_.async_wait(
        [self = shared_from_this(), generation = generation_](std::error_code ec) {
          if (ec || generation != self->generation_ || self->connected_) return;
          self->HandshakeFailed(asio::error::timed_out);
        });
  }

  // The dialled peer failed the TLS handshake (its certificate is not trusted, it speaks no TLS,
  // it never finished): counted, then redialled after the backoff.
  void HandshakeFailed(std::error_code ec) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (handshake_failures_++ % 100 == 0) {
      spdlog::warn("transport: node={:x} TLS handshake with peer={:x} at {}:{} failed: {}",
                   owner_.options_.self, peer_, address_.host, address_.port, ec.message());
    }
    owner_.Count(ConnectionRefusal::kDialTlsHandshake);
    Fail("tls handshake", ec);
  }

  void OnConnected() {
    if (closed_) return Reset();
    std::error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    connected_ = true;
    connected_at_ = std::chrono::steady_clock::now();
    queue_.push_front({Hello(owner_.options_.cluster_id, owner_.options_.self), 0, {}});
    Count([](PeerLinkStats& s) {
      ++s.connects;
      s.connected = true;
    });
    spdlog::info("transport: connected node={:x} peer={:x} addr={}:{}", owner_.options_.self, peer_,
                 address_.host, address_.port);
    WatchForClose();
    MaybeWrite();
  }

  // The peer never writes on this connection, so a readable socket means it was closed (the
  // peer restarted, a proxy or NAT dropped it). Notice now and redial: otherwise the next frame
  // goes into the dead socket and is lost — on an idle follower-to-follower link that frame is
  // the pre-vote of the next election, which then times out and backs off (chaos, slow
  // failovers after partitions).
  void WatchForClose() {
    socket_.async_wait(tcp::socket::wait_read,
                       [self = shared_from_this(), generation = generation_](std::error_code ec) {
                         if (generation != self->generation_ || !self->connected_) return;
                         self->Fail("idle", ec ? ec : std::error_code(asio::error::eof));
                       });
  }

  void MaybeWrite() {
    if (!connected_ || writing_ || queue_.empty()) return;
    // The peer never writes on this connection: readable means closed. Check before writing, so
    // frames queued after the peer died (its FIN already here, the close-watch not yet run) are
    // reported as not sent instead of going into a dead socket as "maybe delivered".
    if (PeerClosed()) return Fail("idle", asio::error::eof);
    writing_ = true;
    in_write_ = std::min(queue_.size(), kMaxGatherFrames);
    buffers_.clear();
    for (std::size_t i = 0; i < in_write_; ++i)
      buffers_.emplace_back(asio::buffer(queue_[i].bytes));
    auto on_written = [self = shared_from_this()](std::error_code ec, std::size_t) {
      self->OnWritten(ec);
    };
    if (tls_) {
      // asio's TLS stream encrypts one buffer per write: the gathered frames go as one buffer,
      // so they leave in a few TLS records and socket writes instead of one per frame.
      tls_out_.clear();
      for (const asio::const_buffer& b : buffers_)
        tls_out_.append(static_cast<const char*>(b.data()), b.size());
      asio::async_write(*tls_, asio::buffer(tls_out_), std::move(on_written));
    } else {
      asio::async_write(socket_, buffers_, std::move(on_written));
    }
  }

  bool PeerClosed() {
    char byte = 0;
    const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  }

  void OnWritten(std::error_code ec) {
    if (ec) return Fail("write", ec);  // with writing_ still set: those frames may have gone out
    writing_ = false;
    std::uint64_t sent = 0;
    for (std::size_t i = 0; i < in_write_; ++i) {
      queued_bytes_ -= queue_.front().payload_bytes;
      queue_.pop_front();
      ++sent;
    }
    in_write_ = 0;
    Count([sent](PeerLinkStats& s) { s.frames_sent += sent; });
    MaybeWrite();
  }

  void Fail(const char* what, std::error_code ec) {
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (connected_) {
      spdlog::warn("transport: lost node={:x} peer={:x} during {}: {}", owner_.options_.self, peer_,
                   what, ec.message());
    }
    Count([&](PeerLinkStats& s) {
      if (!connected_) ++s.connect_failures;
      s.frames_dropped += queue_.size();
      s.connected = false;
    });
    // Back off from scratch only after a connection that lasted: a peer (or proxy) that accepts
    // and closes at once must not be redialled in a tight loop.
    if (connected_ && std::chrono::steady_clock::now() - connected_at_ >= std::chrono::seconds(1)) {
      attempt_ = 0;
    }
    Reset();
    if (owner_.on_unreachable_) owner_.on_unreachable_(peer_);
    ScheduleReconnect();
  }

  // Drops the connection and everything queued: Raft retransmits what matters, and stale
  // heartbeats delivered in a burst after a reconnect would only mislead the receiver. Frames no
  // byte of which reached the socket are reported as not sent; those of a write in progress (the
  // first in_write_ while writing_) may have reached the peer.
  void Reset() {
    ++generation_;  // a close-watch of the old socket must not fail the next one
    const std::size_t maybe_sent = writing_ ? in_write_ : 0;
    for (std::size_t i = maybe_sent; i < queue_.size(); ++i) {
      if (queue_[i].not_sent) queue_[i].not_sent();
    }
    std::error_code ignored;
    socket_.close(ignored);
    connected_ = false;
    writing_ = false;
    in_write_ = 0;
    queue_.clear();
    queued_bytes_ = 0;
  }

  void ScheduleReconnect() {
    const auto& opts = owner_.options_;
    double cap = std::min<double>(
        opts.reconnect_max_ms,
        opts.reconnect_min_ms * static_cast<double>(1ULL << std::min(attempt_, 20)));
    ++attempt_;
    double ms = cap * std::uniform_real_distribution<double>(0.5, 1.5)(rng_);
    waiting_ = true;
    timer_.expires_after(std::chrono::microseconds(static_cast<std::int64_t>(ms * 1000)));
    timer_.async_wait(
        [self = shared_from_this(), generation = ++wait_generation_](std::error_code ec) {
          if (ec || generation != self->wait_generation_ || !self->waiting_) return;
          self->waiting_ = false;
          self->Connect();
        });
  }

  template <typename F>
  void Count(F&& f) {
    std::lock_guard lock(stats_mu_);
    f(stats_);
  }

  PeerTransport& owner_;
  const NodeId peer_;
  const PeerAddress address_;
  asio::strand<asio::io_context::executor_type> strand_;
  tcp::socket socket_;
  std::unique_ptr<TlsStream> tls_;        // over socket_ when peer TLS is on (one per connection)
  std::uint64_t handshake_failures_ = 0;  // of this link: one in 100 is logged
  tcp::resolver resolver_;
  asio::steady_timer timer_;
  asio::steady_timer handshake_timer_;  // the TLS handshake's deadline (hello_timeout)
  std::mt19937_64 rng_;

  struct Queued {
    std::string bytes;          // length prefix + payload
    std::size_t payload_bytes;  // counted in queued_bytes_ (0 for the hello)
    NotSentHandler not_sent;    // may be empty
  };
  std::deque<Queued> queue_;  // the first in_write_ are being written while writing_
  std::vector<asio::const_buffer> buffers_;
  std::string tls_out_;             // with TLS: the frames of the write in progress, in one buffer
  std::uint64_t queued_bytes_ = 0;  // payload bytes queued (excludes the hello)
  std::size_t in_write_ = 0;
  int attempt_ = 0;
  std::uint64_t generation_ = 0;  // bumped by Reset
  bool waiting_ = false;          // a redial is scheduled on timer_ (Nudge may dial now)
  std::uint64_t wait_generation_ = 0;
  std::chrono::steady_clock::time_point connected_at_;
  bool connected_ = false;
  bool writing_ = false;
  bool closed_ = false;

  mutable std::mutex stats_mu_;
  PeerLinkStats stats_;
};

// One accepted connection: reads the hello, then frames, and hands them to the FrameHandler.
class PeerTransport::Inbound : public std::enable_shared_from_this<Inbound> {
 public:
  Inbound(PeerTransport& owner, tcp::socket socket, asio::ip::address address)
      : owner_(owner),
        socket_(std::move(socket)),
        address_(std::move(address)),
        hello_timer_(socket_.get_executor()),
        frame_timer_(socket_.get_executor()) {
    if (owner_.options_.tls) {
      tls_ = std::make_unique<TlsStream>(socket_, owner_.options_.tls->server_context());
    }
  }

  void Start() {
    hello_timer_.expires_after(owner_.options_.hello_timeout);
    hello_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec || self->hello_seen_) return;
      self->timed_out_ = true;
      spdlog::warn(
          "transport: node={:x} closing a connection from {} that sent no hello within {} ms",
          self->owner_.options_.self, self->address_.to_string(),
          self->owner_.options_.hello_timeout.count());
      self->owner_.Count(ConnectionRefusal::kHelloTimeout);
      std::error_code ignored;
      self->socket_.close(ignored);  // the pending read fails and Done() runs
    });
    if (tls_) return Handshake();
    ReadMore();
  }

  void Close() {
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      std::error_code ignored;
      self->socket_.close(ignored);
    });
  }

 private:
  // The TLS handshake, inside the hello deadline; then the client certificate against
  // --peer-cert-allowed-cn / --peer-cert-allowed-hostname.
  void Handshake() {
    tls_->async_handshake(
        asio::ssl::stream_base::server, [self = shared_from_this()](std::error_code ec) {
          if (ec) {
            if (!self->timed_out_ && !self->closing_) {
              spdlog::warn("transport: node={:x} TLS handshake with {} failed: {}",
                           self->owner_.options_.self, self->address_.to_string(), ec.message());
              self->owner_.Count(ConnectionRefusal::kTlsHandshake);
            }
            return self->Done();
          }
          X509Ptr cert(SSL_get1_peer_certificate(self->tls_->native_handle()));
          if (!self->owner_.options_.tls->ClientAllowed(cert.get())) {
            spdlog::warn(
                "transport: node={:x} refusing {}: its certificate fails "
                "--peer-cert-allowed-cn/--peer-cert-allowed-hostname",
                self->owner_.options_.self, self->address_.to_string());
            self->owner_.Count(ConnectionRefusal::kCertNotAllowed);
            return self->Done();
          }
          self->ReadMore();
        });
  }

  // With client certificates verified, the certificate names the member the hello named.
  bool CertificateNamesPeer() const {
    if (!tls_) return true;
    const PeerTls& tls = *owner_.options_.tls;
    if (!tls.verifies_peers() || !tls.options().client_cert_auth) return true;
    X509Ptr cert(SSL_get1_peer_certificate(tls_->native_handle()));
    return owner_.CertificateMatches(cert.get(), peer_);
  }

  // A join request over TLS with client certificates verified: the certificate names the name
  // the new member asks to join under.
  bool CertificateNamesJoiner(const raftpb::JoinRequest& request) const {
    if (!tls_) return true;
    const PeerTls& tls = *owner_.options_.tls;
    if (!tls.verifies_peers() || !tls.options().client_cert_auth) return true;
    X509Ptr cert(SSL_get1_peer_certificate(tls_->native_handle()));
    return CertificateNamesMember(cert.get(), request.name());
  }

  template <typename Handler>
  void ReadSome(asio::mutable_buffer buffer, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffer, std::forward<Handler>(handler));
    } else {
      socket_.async_read_some(buffer, std::forward<Handler>(handler));
    }
  }

  // Reads whatever the socket has (up to the free space of in_) and hands every complete frame in
  // it to OnFrame: one recv serves all the frames a peer's gathered write carried, instead of two
  // recvs (prefix, body) per frame.
  void ReadMore() {
    if (begin_ == end_) {
      begin_ = end_ = 0;
      // A large frame grew the buffer: give the memory back once it is consumed.
      if (in_.size() > kReadChunk) std::vector<char>().swap(in_);
    } else if (begin_ > 0 && in_.size() - end_ < kMinReadSpace) {
      std::memmove(in_.data(), in_.data() + begin_, end_ - begin_);  // the tail to the front
      end_ -= begin_;
      begin_ = 0;
    }
    // Room for at least kMinReadSpace more bytes; a large frame's buffer at most doubles per read,
    // so memory follows the bytes that arrived, not the size a length prefix announced.
    if (in_.size() - end_ < kMinReadSpace) {
      const std::size_t grown = std::max({end_ + kMinReadSpace, in_.size() * 2, kReadChunk});
      in_.resize(need_ > 0 ? std::min(grown, std::max(begin_ + need_, end_ + kMinReadSpace))
                           : std::max(end_ + kMinReadSpace, kReadChunk));
    }
    ReadSome(asio::buffer(in_.data() + end_, in_.size() - end_),
             [self = shared_from_this()](std::error_code ec, std::size_t n) {
               if (ec) return self->Done();
               self->end_ += n;
               if (!self->ParseFrames()) return self->Done();
               self->ReadMore();
             });
  }

  // Consumes the complete frames in [begin_, end_); false if the connection must close. need_
  // becomes the size of the partial frame left at begin_ (0 while its prefix is incomplete).
  bool ParseFrames() {
    need_ = 0;
    while (end_ - begin_ >= 4) {
      const char* at = in_.data() + begin_;
      const auto size = GetBigEndian32(at);
      if (!CheckFrameSize(size)) return false;
      if (end_ - begin_ - 4 < size) {
        need_ = 4 + static_cast<std::size_t>(size);
        return true;
      }
      std::string frame(at + 4, size);
      begin_ += 4 + static_cast<std::size_t>(size);
      ++frames_done_;
      if (!OnFrame(std::move(frame))) return false;
    }
    return true;
  }

  // Checks every half frame_read_timeout: a frame that was partly received at the previous check
  // and is still not complete (no frame finished since) closes the connection. So a frame has
  // between half and all of frame_read_timeout to arrive, and steady traffic costs no timer.
  void WatchPartialFrames() {
    frame_timer_.expires_after(owner_.options_.frame_read_timeout / 2);
    frame_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
      if (ec) return;
      const bool partial = self->end_ > self->begin_;
      if (partial && self->partial_at_check_ && self->frames_done_ == self->frames_at_check_) {
        spdlog::warn(
            "transport: node={:x} closing the connection from peer={:x}: a frame ({} of {} "
            "bytes received) was not completed within {} ms",
            self->owner_.options_.self, self->peer_, self->end_ - self->begin_, self->need_,
            self->owner_.options_.frame_read_timeout.count());
        self->owner_.Count(FrameDrop::kPartialFrameTimeout);
        std::error_code ignored;
        self->socket_.close(ignored);  // the pending read fails and Done() runs
        return;
      }
      self->partial_at_check_ = partial;
      self->frames_at_check_ = self->frames_done_;
      self->WatchPartialFrames();
    });
  }

  bool CheckFrameSize(std::uint32_t size) const {
    const bool join = owner_.options_.answer_join && size <= kMaxJoinFrameBytes;
    if (!hello_seen_ && size != kHelloBytes && !join) {
      spdlog::warn(
          "transport: node={:x} rejecting a connection whose first frame ({} bytes) is not a "
          "hello",
          owner_.options_.self, size);
      owner_.Count(ConnectionRefusal::kBadHello);
      return false;
    }
    if (size > owner_.options_.max_frame_bytes) {
      owner_.Count(FrameDrop::kFrameTooLarge);
      spdlog::warn(
          "transport: node={:x} dropping connection from peer={:x}: frame of {} bytes exceeds "
          "the limit of {}",
          owner_.options_.self, peer_, size, owner_.options_.max_frame_bytes);
      return false;
    }
    return true;
  }

  // A join handshake (peer_join.h): one answer, written before the connection closes. The answer
  // is small and the socket fresh, so the blocking write returns at once.
  void AnswerJoin(const raftpb::JoinRequest& request) {
    hello_timer_.cancel();
    const std::string answer = owner_.options_.answer_join(request);
    std::string framed;
    PutBigEndian32(&framed, static_cast<std::uint32_t>(answer.size()));
    framed += answer;
    std::error_code ec;
    if (tls_) {
      asio::write(*tls_, asio::buffer(framed), ec);
    } else {
      asio::write(socket_, asio::buffer(framed), ec);
    }
    spdlog::info("transport: node={:x} answered a join request from {} (name '{}'){}",
                 owner_.options_.self, address_.to_string(), request.name(),
                 ec ? ": " + ec.message() : "");
  }

  bool OnFrame(std::string body) {
    if (!hello_seen_ && owner_.options_.answer_join) {
      raftpb::JoinRequest join;
      if (DecodeJoinRequest(body, &join)) {
        if (!CertificateNamesJoiner(join)) {
          spdlog::warn(
              "transport: node={:x} refusing a join request from {} as '{}': its certificate "
              "does not name it",
              owner_.options_.self, address_.to_string(), join.name());
          owner_.Count(ConnectionRefusal::kCertMemberMismatch);
          return false;
        }
        AnswerJoin(join);
        return false;
      }
    }
    if (!hello_seen_) {
      if (body.size() != kHelloBytes ||
          std::string_view(body).substr(0, kHelloMagic.size()) != kHelloMagic) {
        spdlog::warn("transport: node={:x} rejecting a connection that did not start with a hello",
                     owner_.options_.self);
        owner_.Count(ConnectionRefusal::kBadHello);
        return false;
      }
      std::uint64_t cluster = GetBigEndian64(body.data() + kHelloMagic.size());
      if (cluster != owner_.options_.cluster_id) {
        spdlog::warn("transport: node={:x} rejecting peer from cluster {:x} (ours is {:x})",
                     owner_.options_.self, cluster, owner_.options_.cluster_id);
        owner_.Count(ConnectionRefusal::kWrongCluster);
        return false;
      }
      peer_ = NodeId(GetBigEndian64(body.data() + kHelloMagic.size() + 8));
      if (owner_.options_.accept_peer && !owner_.options_.accept_peer(peer_)) {
        spdlog::warn("transport: node={:x} rejecting node={:x}: not a member of this cluster",
                     owner_.options_.self, peer_);
        owner_.Count(ConnectionRefusal::kNotMember);
        return false;
      }
      if (!CertificateNamesPeer()) {
        spdlog::warn(
            "transport: node={:x} rejecting node={:x}: its certificate does not name that "
            "member",
            owner_.options_.self, peer_);
        owner_.Count(ConnectionRefusal::kCertMemberMismatch);
        return false;
      }
      hello_seen_ = true;
      hello_timer_.cancel();
      WatchPartialFrames();
      owner_.PeerAlive(peer_);
      return true;
    }
    if (owner_.stopped_.load()) return false;
    owner_.on_frame_(peer_, std::move(body));
    return true;
  }

  void Done() {
    std::error_code ignored;
    hello_timer_.cancel();
    frame_timer_.cancel();
    socket_.close(ignored);
    std::lock_guard lock(owner_.mu_);
    owner_.inbound_.erase(this);
    auto it = owner_.inbound_per_address_.find(address_);
    if (it != owner_.inbound_per_address_.end() && --it->second == 0) {
      owner_.inbound_per_address_.erase(it);
    }
  }

  PeerTransport& owner_;
  tcp::socket socket_;
  std::unique_ptr<TlsStream> tls_;   // over socket_ when peer TLS is on
  const asio::ip::address address_;  // the remote address (counted in inbound_per_address_)
  std::vector<char> in_;             // [begin_, end_): bytes read and not yet parsed into frames
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  std::size_t need_ = 0;  // bytes of the partial frame at begin_ (0: its prefix is incomplete)
  asio::steady_timer hello_timer_;
  asio::steady_timer frame_timer_;     // the deadline of a partly received frame
  std::uint64_t frames_done_ = 0;      // complete frames received (the hello included)
  std::uint64_t frames_at_check_ = 0;  // frames_done_ at the previous partial-frame check
  bool partial_at_check_ = false;      // a frame was partly received at that check
  bool hello_seen_ = false;
  bool timed_out_ = false;  // the hello deadline closed the socket (counted there)
  bool closing_ = false;    // Close(): the transport is stopping
  NodeId peer_;
};

PeerTransport::PeerTransport(asio::io_context& io, PeerTransportOptions options,
                             FrameHandler on_frame, UnreachableHandler on_unreachable)
    : io_(io),
      options_(std::move(options)),
      on_frame_(std::move(on_frame)),
      on_unreachable_(std::move(on_unreachable)),
      acceptor_(io),
      accept_backoff_(io) {}

PeerTransport::~PeerTransport() { Stop(); }

Status PeerTransport::Start() {
  std::error_code ec;
  auto address = asio::ip::make_address(options_.listen_host, ec);
  if (ec)
    return Status::InvalidArgument(
        fmt::format("bad peer listen address '{}': {}", options_.listen_host, ec.message()));
  tcp::endpoint endpoint(address, options_.listen_port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::IOError(fmt::format("cannot listen for peers on {}:{}: {}", options_.listen_host,
                                       options_.listen_port, ec.message()));
  }
  bound_port_ = acceptor_.local_endpoint().port();
  Accept();
  return Status::Ok();
}

void PeerTransport::Accept() {
  acceptor_.async_accept(asio::make_strand(io_), [this](std::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopped_) return;
      // Out of descriptors (or another transient failure): the pending connection stays in the
      // backlog, so accepting again at once would spin. Wait, then try again.
      Count(ConnectionRefusal::kAcceptError);
      spdlog::warn("transport: node={:x} accept failed: {}; retrying in {} ms", options_.self,
                   ec.message(), options_.accept_error_backoff.count());
      return AcceptLater();
    }
    std::error_code peer_ec;
    const tcp::endpoint remote = socket.remote_endpoint(peer_ec);
    if (peer_ec) return Accept();  // already gone
    if (std::optional<ConnectionRefusal> refused = Admit(remote.address())) {
      Count(*refused);
      std::error_code ignored;
      socket.close(ignored);
      return Accept();
    }
    std::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    auto inbound = std::make_shared<Inbound>(*this, std::move(socket), remote.address());
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      inbound_[inbound.get()] = inbound;
    }
    inbound->Start();
    Accept();
  });
}

void PeerTransport::AcceptLater() {
  accept_backoff_.expires_after(options_.accept_error_backoff);
  accept_backoff_.async_wait([this](std::error_code ec) {
    if (!ec && !stopped_) Accept();
  });
}

std::optional<ConnectionRefusal> PeerTransport::Admit(const asio::ip::address& address) {
  std::lock_guard lock(mu_);
  if (inbound_.size() >= options_.max_inbound_connections) {
    if (refusals_logged_.fetch_add(1) % 64 == 0)
      spdlog::warn("transport: node={:x} refusing a connection from {}: {} inbound connections",
                   options_.self, address.to_string(), inbound_.size());
    return ConnectionRefusal::kTotalLimit;
  }
  std::size_t& from_address = inbound_per_address_[address];
  if (from_address >= options_.max_inbound_per_address) {
    // Logged once per 64 refusals: a flood must not flood the log.
    if (refusals_logged_.fetch_add(1) % 64 == 0) {
      spdlog::warn("transport: node={:x} refusing a connection from {}: {} already open from it",
                   options_.self, address.to_string(), from_address);
    }
    return ConnectionRefusal::kPerAddressLimit;
  }
  ++from_address;
  return std::nullopt;
}

bool PeerTransport::CertificateMatches(X509* cert, NodeId id) const {
  const std::string name = options_.member_name ? options_.member_name(id) : "";
  if (!name.empty()) return CertificateNamesMember(cert, name);
  if (cert == nullptr || !options_.member_names) return false;
  for (const std::string& known : options_.member_names()) {
    if (CertificateNamesMember(cert, known)) return false;
  }
  return true;
}

void PeerTransport::Count(FrameDrop reason) const {
  if (options_.drops) options_.drops->Count(reason);
}

void PeerTransport::Count(ConnectionRefusal reason) const {
  if (options_.drops) options_.drops->Count(reason);
}

void PeerTransport::Stop() {
  if (stopped_.exchange(true)) return;
  asio::post(acceptor_.get_executor(), [this] {
    std::error_code ignored;
    acceptor_.close(ignored);
    accept_backoff_.cancel();
  });
  std::lock_guard lock(mu_);
  for (auto& [id, out] : outbound_) out->Close();
  outbound_.clear();
  for (auto& [ptr, weak] : inbound_) {
    if (auto in = weak.lock()) in->Close();
  }
}

void PeerTransport::SetPeer(NodeId peer, PeerAddress address) {
  std::lock_guard lock(mu_);
  if (stopped_) return;
  auto it = outbound_.find(peer);
  if (it != outbound_.end()) it->second->Close();
  auto out = std::make_shared<Outbound>(io_, *this, peer, std::move(address));
  outbound_[peer] = out;
  out->Start();
}

void PeerTransport::RemovePeer(NodeId peer) {
  std::lock_guard lock(mu_);
  auto it = outbound_.find(peer);
  if (it == outbound_.end()) return;
  it->second->Close();
  outbound_.erase(it);
}

void PeerTransport::Send(NodeId peer, std::string frame, NotSentHandler not_sent) {
  if (frame.size() > options_.max_frame_bytes) {
    spdlog::error(
        "transport: node={:x} not sending a {}-byte frame to peer={:x}: over the {}-byte limit",
        options_.self, frame.size(), peer, options_.max_frame_bytes);
    if (not_sent) not_sent();
    return;
  }
  std::shared_ptr<Outbound> out;
  {
    std::lock_guard lock(mu_);
    auto it = outbound_.find(peer);
    if (it != outbound_.end()) out = it->second;
  }
  if (!out) {
    if (not_sent) not_sent();
    return;
  }
  out->Enqueue(std::move(frame), std::move(not_sent));
}

void PeerTransport::PeerAlive(NodeId peer) {
  std::shared_ptr<Outbound> out;
  {
    std::lock_guard lock(mu_);
    auto it = outbound_.find(peer);
    if (it == outbound_.end()) return;
    out = it->second;
  }
  out->Nudge();
}

PeerLinkStats PeerTransport::Stats(NodeId peer) const {
  std::lock_guard lock(mu_);
  auto it = outbound_.find(peer);
  return it == outbound_.end() ? PeerLinkStats{} : it->second->Stats();
}

}  // namespace epoch::server
