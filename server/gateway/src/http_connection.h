// One HTTP/1.x connection of the gateway (gateway_http.h has the contract): read a head and its
// body, answer, repeat while the client keeps the connection; a stream answer ends it.
//
// Stream is a plain socket or a TLS stream over one (the handshake comes first, with the context
// given).
//
// Threading: every member runs on strand_; gRPC callbacks post to it.
#pragma once

#include <array>
#include <asio.hpp>
#include <asio/ssl.hpp>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "epoch/gateway/gateway_http.h"
#include "epoch/gateway/http_request.h"
#include "epoch/gateway/route_table.h"
#include "epoch/stream_slots.h"
#include "grpc_calls.h"

namespace epoch::gateway {

template <typename Stream>
class HttpConnection : public std::enable_shared_from_this<HttpConnection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, asio::ip::tcp::socket>;

  // `tls` is the TLS context for a TLS stream, null for a plain socket.
  // `slot` is the connection's admission (released when the connection is destroyed).
  HttpConnection(asio::ip::tcp::socket socket, std::shared_ptr<GatewayHttp::Shared> shared,
                 std::unique_ptr<StreamSlots::Slot> slot,
                 std::shared_ptr<asio::ssl::context> tls = nullptr);
  void Start();

 private:
  static Stream MakeStream(asio::ip::tcp::socket socket, asio::ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return socket;
    }
  }
  asio::ip::tcp::socket::lowest_layer_type& Socket() { return stream_.lowest_layer(); }

  void ReadHead();
  void OnHead(std::size_t head_bytes);
  void ReadBody();
  void Dispatch(std::string body);
  void CallUnary(const Route& route, std::string request);
  void CallStream(const Route& route, std::string request);
  // Watches the socket while a call runs: the client closing it cancels the call.
  void WatchForClose();

  // A whole answer; the connection stays open after it unless the request or `close` says not.
  void Answer(int code, std::string content_type, std::string body, bool close = false);
  void Answer(HttpAnswer answer) {
    Answer(answer.code, std::move(answer.content_type), std::move(answer.body));
  }
  void AnswerError(int code, grpc::StatusCode grpc_code, const std::string& message,
                   bool close = false);

  void SendStreamHead();
  void StreamLine(std::string line);
  void StreamDone(const grpc::Status& status);
  // Queues bytes; one write at a time.
  void Send(std::string bytes);
  void Flush();  // starts a write of the pending bytes unless one is in flight
  void OnWritten(std::error_code ec);
  void AfterAnswer();
  // Ends the connection after a final answer: no more sending, what arrives is read and dropped
  // until the client closes or kLinger passes.
  void Linger();
  void DrainUntilEof();
  void Close();
  void Drop();
  std::string Label() const;

  std::shared_ptr<asio::ssl::context> tls_;  // outlives stream_'s SSL object; null for plain
  Stream stream_;
  asio::strand<asio::any_io_executor> strand_;
  asio::steady_timer timer_;
  std::shared_ptr<GatewayHttp::Shared> shared_;
  std::unique_ptr<StreamSlots::Slot> slot_;  // destroyed before shared_, which owns its slots
  asio::streambuf in_;                       // the head (at most kMaxHeadBytes) and what follows it
  std::string body_;                         // the body being read

  HttpRequestHead head_;
  const Route* route_ = nullptr;      // of the request being served
  std::shared_ptr<CallHandle> call_;  // the call in flight, if any
  bool streaming_ = false;            // a stream answer: the connection ends with it
  bool stream_head_sent_ = false;
  bool close_after_ = false;         // end the connection once the answer is written
  bool answer_complete_ = false;     // the whole answer is queued: once written, the next request
  bool watching_ = false;            // the close watch waits on the socket
  bool resume_after_watch_ = false;  // the close watch, cancelled, starts the next read
  bool client_gone_ = false;         // the close watch saw the client close
  bool closed_ = false;

  std::string writing_;  // the buffer of the write in flight
  std::string pending_;  // bytes waiting for it
};

}  // namespace epoch::gateway
