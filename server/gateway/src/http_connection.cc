#include "http_connection.h"

#include <fmt/format.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "epoch/gateway/json_codec.h"
#include "gateway_shared.h"

namespace epoch::gateway {
namespace {

using asio::ip::tcp;

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kJson = "application/json";
constexpr std::string_view kText = "text/plain; charset=utf-8";
// After an answer that ends the connection, what the client still sends is read and dropped for
// this long, so that closing does not reset the connection before the answer is read.
constexpr std::chrono::seconds kLinger{2};

// A token travels as gRPC metadata, which takes printable ASCII only.
bool PrintableAscii(std::string_view s) {
  for (const char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

template <typename Stream>
HttpConnection<Stream>::HttpConnection(tcp::socket socket,
                                       std::shared_ptr<GatewayHttp::Shared> shared,
                                       std::unique_ptr<StreamSlots::Slot> slot,
                                       std::shared_ptr<asio::ssl::context> tls)
    : tls_(std::move(tls)),
      stream_(MakeStream(std::move(socket), tls_.get())),
      strand_(asio::make_strand(stream_.get_executor())),
      timer_(strand_),
      shared_(std::move(shared)),
      slot_(std::move(slot)),
      in_(GatewayHttp::kMaxHeadBytes) {}

template <typename Stream>
void HttpConnection<Stream>::Start() {
  asio::dispatch(strand_, [self = this->shared_from_this()] {
    std::error_code ignored;
    self->Socket().non_blocking(true, ignored);  // the close watch peeks without blocking
    if constexpr (kTls) {
      self->timer_.expires_after(GatewayHttp::kIdleTimeout);
      self->timer_.async_wait(asio::bind_executor(self->strand_, [self](std::error_code ec) {
        if (!ec) self->Drop();
      }));
      self->stream_.async_handshake(
          asio::ssl::stream_base::server,
          asio::bind_executor(self->strand_, [self](std::error_code ec) {
            if (self->closed_) return;
            if (ec) return self->Drop();  // no or a refused client certificate, not TLS
            self->ReadHead();
          }));
    } else {
      self->ReadHead();
    }
  });
}

template <typename Stream>
void HttpConnection<Stream>::ReadHead() {
  head_ = HttpRequestHead{};
  route_ = nullptr;
  timer_.expires_after(GatewayHttp::kIdleTimeout);
  timer_.async_wait(
      asio::bind_executor(strand_, [self = this->shared_from_this()](std::error_code ec) {
        if (!ec) self->Drop();
      }));
  asio::async_read_until(stream_, in_, "\r\n\r\n",
                         asio::bind_executor(strand_, [self = this->shared_from_this()](
                                                          std::error_code ec, std::size_t n) {
                           if (self->closed_) return;
                           if (ec == asio::error::not_found) {
                             return self->Answer(431, std::string(kText),
                                                 "Request Header Fields Too Large\n", true);
                           }
                           if (ec) {
                             // A client closing an idle keep-alive connection is no drop.
                             if (ec == asio::error::eof && self->in_.size() == 0)
                               return self->Close();
                             return self->Drop();
                           }
                           self->OnHead(n);
                         }));
}

template <typename Stream>
void HttpConnection<Stream>::OnHead(std::size_t head_bytes) {
  const auto begin = asio::buffers_begin(in_.data());
  const std::string text(begin, begin + static_cast<std::ptrdiff_t>(head_bytes));
  in_.consume(head_bytes);
  if (head_bytes > GatewayHttp::kMaxHeadBytes) {
    return Answer(431, std::string(kText), "Request Header Fields Too Large\n", true);
  }
  Result<HttpRequestHead> head = ParseRequestHead(text);
  if (!head.ok()) return Answer(400, std::string(kText), head.status().message() + "\n", true);
  head_ = *std::move(head);
  route_ = FindRoute(head_.path);
  if (head_.chunked) return Answer(411, std::string(kText), "Length Required\n", true);
  if (head_.content_length > shared_->options.max_body_bytes) {
    return AnswerError(413, grpc::StatusCode::RESOURCE_EXHAUSTED,
                       fmt::format("request body of {} bytes is larger than the limit {}",
                                   head_.content_length, shared_->options.max_body_bytes),
                       true);
  }
  if (head_.expect_continue && in_.size() < head_.content_length) {
    return asio::async_write(stream_, asio::buffer(kContinue),
                             asio::bind_executor(strand_, [self = this->shared_from_this()](
                                                              std::error_code ec, std::size_t) {
                               if (ec) return self->Drop();
                               self->ReadBody();
                             }));
  }
  ReadBody();
}

template <typename Stream>
void HttpConnection<Stream>::ReadBody() {
  // The bytes already read past the head, then the rest straight into the body.
  const std::size_t have = std::min<std::size_t>(in_.size(), head_.content_length);
  const auto begin = asio::buffers_begin(in_.data());
  body_.assign(begin, begin + static_cast<std::ptrdiff_t>(have));
  in_.consume(have);
  if (have == head_.content_length) return Dispatch(std::move(body_));
  body_.resize(head_.content_length);
  asio::async_read(stream_, asio::buffer(body_.data() + have, body_.size() - have),
                   asio::bind_executor(
                       strand_, [self = this->shared_from_this()](std::error_code ec, std::size_t) {
                         if (self->closed_) return;
                         if (ec) return self->Drop();
                         self->Dispatch(std::move(self->body_));
                       }));
}

template <typename Stream>
void HttpConnection<Stream>::Dispatch(std::string body) {
  timer_.cancel();
  const std::string& path = head_.path;
  if (path == "/version") {
    if (head_.method != "GET") return Answer(405, std::string(kText), "Method Not Allowed\n");
    return Answer(200, std::string(kJson),
                  fmt::format("{{\"etcdserver\":{},\"etcdcluster\":{}}}",
                              JsonQuote(shared_->options.server_version),
                              JsonQuote(shared_->options.cluster_version)));
  }
  if (IsGatewayPath(path)) {
    if (route_ == nullptr) return Answer(404, std::string(kText), "Not Found\n");
    if (head_.method != "POST") return Answer(405, std::string(kText), "Method Not Allowed\n");
    if (!PrintableAscii(head_.authorization)) {
      return AnswerError(400, grpc::StatusCode::INVALID_ARGUMENT,
                         "authorization header is not printable ASCII");
    }
    Result<std::string> request = JsonToRequest(*route_, body);
    if (!request.ok()) {
      return AnswerError(400, grpc::StatusCode::INVALID_ARGUMENT, request.status().message());
    }
    if (route_->shape == CallShape::kUnary) return CallUnary(*route_, *std::move(request));
    return CallStream(*route_, *std::move(request));
  }
  if (head_.method != "GET") return Answer(405, std::string(kText), "Method Not Allowed\n");
  shared_->fallback(path, [self = this->shared_from_this()](HttpAnswer answer) {
    asio::post(self->strand_, [self, answer = std::move(answer)]() mutable {
      if (!self->closed_) self->Answer(std::move(answer));
    });
  });
}

template <typename Stream>
void HttpConnection<Stream>::CallUnary(const Route& route, std::string request) {
  call_ = shared_->calls.Unary(route, std::move(request), head_.authorization,
                               [self = this->shared_from_this()](int code, std::string body) {
                                 asio::post(
                                     self->strand_, [self, code, body = std::move(body)]() mutable {
                                       self->call_.reset();
                                       if (!self->closed_)
                                         self->Answer(code, std::string(kJson), std::move(body));
                                     });
                               });
  WatchForClose();
}

template <typename Stream>
void HttpConnection<Stream>::CallStream(const Route& route, std::string request) {
  streaming_ = true;
  shared_->metrics.streams.fetch_add(1, std::memory_order_relaxed);
  StreamSink sink;
  sink.message = [self = this->shared_from_this()](std::string line) {
    asio::post(self->strand_,
               [self, line = std::move(line)]() mutable { self->StreamLine(std::move(line)); });
  };
  sink.done = [self = this->shared_from_this()](grpc::Status status) {
    asio::post(self->strand_, [self, status = std::move(status)] { self->StreamDone(status); });
  };
  call_ = shared_->calls.Stream(route, std::move(request), head_.authorization, std::move(sink));
  WatchForClose();
}

template <typename Stream>
void HttpConnection<Stream>::WatchForClose() {
  watching_ = true;
  Socket().async_wait(
      tcp::socket::wait_read,
      asio::bind_executor(strand_, [self = this->shared_from_this()](std::error_code ec) {
        self->watching_ = false;
        if (self->resume_after_watch_) {
          self->resume_after_watch_ = false;
          if (!self->closed_) self->ReadHead();
          return;
        }
        if (ec || self->closed_ || !self->call_) return;
        char c = 0;
        const ssize_t n = ::recv(self->Socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
          return self->WatchForClose();
        }
        // Bytes of a next request (or, over TLS, any record) wait in the socket
        // until this answer is written.
        if (n > 0) return;
        self->call_->Cancel();  // the client went away
        self->client_gone_ = true;
      }));
}

template <typename Stream>
void HttpConnection<Stream>::Answer(int code, std::string content_type, std::string body,
                                    bool close) {
  shared_->metrics.Request(Label(), code);
  close_after_ = close || head_.close;
  std::string connection;
  if (close_after_) {
    connection = "Connection: close\r\n";
  } else if (!head_.http11) {
    connection = "Connection: keep-alive\r\n";
  }
  answer_complete_ = true;
  Send(HttpResponse(head_.http11 ? 1 : 0, code, content_type, connection, body));
}

template <typename Stream>
void HttpConnection<Stream>::AnswerError(int code, grpc::StatusCode grpc_code,
                                         const std::string& message, bool close) {
  Answer(code, std::string(kJson), ErrorBody(grpc_code, message), close);
}

template <typename Stream>
void HttpConnection<Stream>::SendStreamHead() {
  if (stream_head_sent_) return;
  stream_head_sent_ = true;
  shared_->metrics.Request(Label(), 200);
  Send(head_.http11 ? "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n"
                    : "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n"
                      "Connection: close\r\n\r\n");
}

template <typename Stream>
void HttpConnection<Stream>::StreamLine(std::string line) {
  if (closed_) return;
  SendStreamHead();
  if (head_.http11) line = fmt::format("{:x}\r\n{}\r\n", line.size(), line);
  if (writing_.size() + pending_.size() + line.size() > shared_->options.max_buffered_bytes) {
    shared_->metrics.streams_cut.fetch_add(1, std::memory_order_relaxed);
    return Close();
  }
  Send(std::move(line));
}

template <typename Stream>
void HttpConnection<Stream>::StreamDone(const grpc::Status& status) {
  shared_->metrics.streams.fetch_sub(1, std::memory_order_relaxed);
  call_.reset();
  if (closed_) return;
  if (client_gone_) return Close();
  if (!stream_head_sent_ && !status.ok()) {
    return AnswerError(HttpStatusFromCode(status.error_code()), status.error_code(),
                       status.error_message(), true);
  }
  SendStreamHead();  // a stream that ended without a message has an empty body
  if (!status.ok()) {
    std::string line = StreamError(status);
    if (head_.http11) line = fmt::format("{:x}\r\n{}\r\n", line.size(), line);
    Send(std::move(line));
  }
  if (head_.http11) Send("0\r\n\r\n");
  close_after_ = true;
  answer_complete_ = true;
}

template <typename Stream>
void HttpConnection<Stream>::Send(std::string bytes) {
  if (closed_) return;
  pending_ += bytes;
  Flush();
}

template <typename Stream>
void HttpConnection<Stream>::Flush() {
  if (!writing_.empty() || pending_.empty()) return;
  writing_.swap(pending_);
  asio::async_write(
      stream_, asio::buffer(writing_),
      asio::bind_executor(strand_, [self = this->shared_from_this()](
                                       std::error_code ec, std::size_t) { self->OnWritten(ec); }));
}

template <typename Stream>
void HttpConnection<Stream>::OnWritten(std::error_code ec) {
  writing_.clear();
  if (closed_) return;
  if (ec) return Close();  // the client went away; a call in flight is cancelled
  if (!pending_.empty()) return Flush();
  if (!answer_complete_) return;
  answer_complete_ = false;
  if (close_after_) return Linger();
  AfterAnswer();
}

template <typename Stream>
void HttpConnection<Stream>::AfterAnswer() {
  streaming_ = false;
  stream_head_sent_ = false;
  if (watching_) {
    // The close watch still waits on the socket: cancel it; it starts the next read.
    resume_after_watch_ = true;
    std::error_code ignored;
    Socket().cancel(ignored);
    return;
  }
  ReadHead();
}

template <typename Stream>
void HttpConnection<Stream>::Linger() {
  timer_.expires_after(kLinger);
  timer_.async_wait(
      asio::bind_executor(strand_, [self = this->shared_from_this()](std::error_code ec) {
        if (!ec) self->Close();
      }));
  if constexpr (kTls) {
    // close_notify; the client's answer to it, or the timer, ends the connection.
    stream_.async_shutdown(asio::bind_executor(
        strand_, [self = this->shared_from_this()](std::error_code) { self->Close(); }));
  } else {
    std::error_code ignored;
    Socket().shutdown(tcp::socket::shutdown_send, ignored);
    DrainUntilEof();
  }
}

template <typename Stream>
void HttpConnection<Stream>::DrainUntilEof() {
  auto scratch = std::make_shared<std::array<char, 4096>>();
  stream_.async_read_some(asio::buffer(*scratch),
                          asio::bind_executor(strand_, [self = this->shared_from_this(), scratch](
                                                           std::error_code ec, std::size_t) {
                            if (self->closed_) return;
                            if (ec) return self->Close();
                            self->DrainUntilEof();
                          }));
}

template <typename Stream>
void HttpConnection<Stream>::Close() {
  if (closed_) return;
  closed_ = true;
  timer_.cancel();
  if (call_) call_->Cancel();
  std::error_code ignored;
  Socket().shutdown(tcp::socket::shutdown_both, ignored);
  Socket().close(ignored);
}

template <typename Stream>
void HttpConnection<Stream>::Drop() {
  shared_->metrics.dropped.fetch_add(1, std::memory_order_relaxed);
  Close();
}

template <typename Stream>
std::string HttpConnection<Stream>::Label() const {
  if (route_ != nullptr) return fmt::format("/v3/{}", route_->path);
  if (head_.path == "/version") return "/version";
  return "other";
}

template class HttpConnection<asio::ip::tcp::socket>;
template class HttpConnection<asio::ssl::stream<asio::ip::tcp::socket>>;

}  // namespace epoch::gateway
