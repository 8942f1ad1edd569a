#include "epoch/peer/peer_join.h"

#include <fmt/format.h>

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <memory>

#include "epoch/byte_coding.h"

namespace epoch::server {

std::string EncodeJoinRequest(const raftpb::JoinRequest& request) {
  std::string out(kJoinMagic);
  out += request.SerializeAsString();
  return out;
}

bool DecodeJoinRequest(std::string_view frame, raftpb::JoinRequest* request) {
  if (!frame.starts_with(kJoinMagic)) return false;
  frame.remove_prefix(kJoinMagic.size());
  return request->ParseFromArray(frame.data(), static_cast<int>(frame.size()));
}

namespace {

// One join exchange on its own io_context: connect, (TLS handshake and the answering member's
// certificate), send the request, read the framed answer.
class JoinCall {
 public:
  JoinCall(const std::string& host, std::uint16_t port, const raftpb::JoinRequest& request,
           const JoinTls& tls)
      : host_(host), port_(port), tls_options_(tls), socket_(io_), resolver_(io_) {
    const std::string payload = EncodeJoinRequest(request);
    PutBigEndian32(&out_, static_cast<std::uint32_t>(payload.size()));
    out_ += payload;
  }

  Result<raftpb::JoinResponse> Run(std::chrono::milliseconds timeout) {
    resolver_.async_resolve(host_, std::to_string(port_),
                            [this](std::error_code ec, asio::ip::tcp::resolver::results_type r) {
                              if (ec) return Fail("resolve", ec);
                              Connect(r);
                            });
    io_.run_for(timeout);
    if (!result_.ok()) return result_;
    return response_;
  }

 private:
  void Connect(const asio::ip::tcp::resolver::results_type& endpoints) {
    asio::async_connect(socket_, endpoints, [this](std::error_code ec, const auto&) {
      if (ec) return Fail("connect", ec);
      if (tls_options_.tls == nullptr) return Send();
      tls_ = std::make_unique<TlsStream>(socket_, tls_options_.tls->client_context());
      tls_->async_handshake(asio::ssl::stream_base::client, [this](std::error_code hec) {
        if (hec) return Fail("TLS handshake", hec);
        if (!AnswererNamed()) {
          result_ = Status::Unavailable(
              fmt::format("join via {}:{}: its certificate does not name member '{}'", host_, port_,
                          tls_options_.peer_name));
          return;
        }
        Send();
      });
    });
  }

  bool AnswererNamed() const {
    if (!tls_options_.tls->verifies_peers()) return true;
    X509* cert = SSL_get1_peer_certificate(tls_->native_handle());
    const bool named = CertificateNamesMember(cert, tls_options_.peer_name);
    X509_free(cert);
    return named;
  }

  template <typename Buffer, typename Handler>
  void Write(const Buffer& buffer, Handler&& handler) {
    if (tls_) return asio::async_write(*tls_, buffer, std::forward<Handler>(handler));
    asio::async_write(socket_, buffer, std::forward<Handler>(handler));
  }

  template <typename Buffer, typename Handler>
  void Read(const Buffer& buffer, Handler&& handler) {
    if (tls_) return asio::async_read(*tls_, buffer, std::forward<Handler>(handler));
    asio::async_read(socket_, buffer, std::forward<Handler>(handler));
  }

  void Send() {
    Write(asio::buffer(out_), [this](std::error_code wec, std::size_t) {
      if (wec) return Fail("send", wec);
      ReadPrefix();
    });
  }

  void ReadPrefix() {
    Read(asio::buffer(prefix_), [this](std::error_code ec, std::size_t) {
      if (ec) return Fail("read", ec);
      const std::uint32_t size = GetBigEndian32(prefix_.data());
      if (size > kMaxJoinFrameBytes) {
        result_ = Status::Corruption(fmt::format("join answer of {} bytes", size));
        return;
      }
      body_.resize(size);
      Read(asio::buffer(body_), [this](std::error_code rec, std::size_t) {
        if (rec) return Fail("read", rec);
        result_ = response_.ParseFromString(body_)
                      ? Status::Ok()
                      : Status::Corruption(
                            fmt::format("undecodable join answer from {}:{}", host_, port_));
      });
    });
  }

  void Fail(std::string_view step, std::error_code ec) {
    result_ = Status::Unavailable(
        fmt::format("join via {}:{}: {}: {}", host_, port_, step, ec.message()));
  }

  using TlsStream = asio::ssl::stream<asio::ip::tcp::socket&>;

  const std::string host_;
  const std::uint16_t port_;
  const JoinTls tls_options_;
  asio::io_context io_;
  asio::ip::tcp::socket socket_;
  asio::ip::tcp::resolver resolver_;
  std::unique_ptr<TlsStream> tls_;  // over socket_ with peer TLS
  std::string out_;
  std::array<char, 4> prefix_{};
  std::string body_;
  raftpb::JoinResponse response_;
  Status result_ = Status::Unavailable("no join answer in time");
};

}  // namespace

Result<raftpb::JoinResponse> AskToJoin(const std::string& host, std::uint16_t port,
                                       const raftpb::JoinRequest& request,
                                       std::chrono::milliseconds timeout, const JoinTls& tls) {
  JoinCall call(host, port, request, tls);
  return call.Run(timeout);
}

}  // namespace epoch::server
