// The long-lived bidirectional streams of the etcd v3 API: lease keep-alive and watch.
// Opened by Client::OpenKeepAlive / Client::OpenWatch on the client's preferred endpoint.
//
// A stream that fails is not repaired in place: Receive() or Send() report the error, and the
// owner opens a new one. A stream that the server refused for its auth token (it ended with
// "invalid auth token", or a watch create was cancelled so) tells its Client, whose next Open*
// authenticates again (Session does so with backoff; a watcher resumes with start_revision =
// last seen revision + 1). Replies come in send order: the n-th keep-alive reply answers the
// n-th renewal sent; watch `created` replies answer create requests in order.
//
// Threading: one thread may Send while another Receives (gRPC allows one concurrent writer and
// one concurrent reader). Cancel() may be called from any thread, and runs when the stop token
// given at open time is requested. Destroy the stream only after its reader and writer returned.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/sync_stream.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>

#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::client {

namespace internal {
// Maps the final gRPC status of a stream to a Status (grpc_status.h). Defined in streams.cc.
Status StreamEndStatus(const grpc::Status& status, const std::string& endpoint);
// Whether a stream's end status, or a watch's cancel reason, refuses the stream's auth token.
bool RefusesToken(const Status& end_status);
bool RefusesToken(const etcdserverpb::WatchResponse& response);
}  // namespace internal

template <typename Request, typename Response>
class BidiStream {
 public:
  using Rpc = grpc::ClientReaderWriter<Request, Response>;

  // Takes ownership of a started call. Client only.
  // `on_token_refused` (may be empty) runs when the server refuses the stream's auth token.
  BidiStream(std::unique_ptr<grpc::ClientContext> context, std::unique_ptr<Rpc> rpc,
             std::string endpoint, std::stop_token stop,
             std::function<void()> on_token_refused = {})
      : context_(std::move(context)),
        rpc_(std::move(rpc)),
        endpoint_(std::move(endpoint)),
        on_token_refused_(std::move(on_token_refused)) {
    on_stop_.emplace(std::move(stop), std::function<void()>([this] { Cancel(); }));
  }

  ~BidiStream() {
    on_stop_.reset();
    context_->TryCancel();
    Response ignored;
    while (!finished_ && rpc_->Read(&ignored)) {
    }
    std::lock_guard lock(finish_mu_);
    if (!finished_) (void)rpc_->Finish();
  }

  BidiStream(const BidiStream&) = delete;
  BidiStream& operator=(const BidiStream&) = delete;

  Status Send(const Request& request) {
    std::lock_guard lock(write_mu_);
    if (rpc_->Write(request)) return Status::Ok();
    return Status::Unavailable("stream to " + endpoint_ + " is closed for writing");
  }

  // Blocks until the next reply or the end of the stream (then: the stream's final status, or
  // Unavailable when the server ended it cleanly).
  Result<Response> Receive() {
    Response response;
    if (rpc_->Read(&response)) return response;
    std::lock_guard lock(finish_mu_);
    if (!finished_) {
      finished_ = true;
      end_status_ = internal::StreamEndStatus(rpc_->Finish(), endpoint_);
      if (internal::RefusesToken(end_status_)) TokenRefused();
    }
    return end_status_;
  }

  // Ends the stream; a blocked Receive() returns an error soon after.
  void Cancel() { context_->TryCancel(); }

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }

 protected:
  void TokenRefused() {
    if (on_token_refused_) on_token_refused_();
  }

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<Rpc> rpc_;
  std::string endpoint_;
  std::function<void()> on_token_refused_;
  std::mutex write_mu_;   // one Write at a time
  std::mutex finish_mu_;  // guards finished_ / end_status_
  bool finished_ = false;
  Status end_status_ = Status::Unavailable("stream ended");
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
};

class KeepAliveStream
    : public BidiStream<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse> {
 public:
  using BidiStream::BidiStream;
  // Sends one renewal of `lease`.
  Status SendKeepAlive(LeaseId lease) {
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(lease.value());
    return Send(request);
  }
};

class WatchStream : public BidiStream<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  using BidiStream::BidiStream;
  // BidiStream::Receive, and a create refused for the stream's token tells the Client.
  Result<etcdserverpb::WatchResponse> Receive() {
    Result<etcdserverpb::WatchResponse> response = BidiStream::Receive();
    if (response.ok() && internal::RefusesToken(*response)) TokenRefused();
    return response;
  }
  Status Create(const etcdserverpb::WatchCreateRequest& create) {
    etcdserverpb::WatchRequest request;
    *request.mutable_create_request() = create;
    return Send(request);
  }
  Status CancelWatch(std::int64_t watch_id) {
    etcdserverpb::WatchRequest request;
    request.mutable_cancel_request()->set_watch_id(watch_id);
    return Send(request);
  }
  Status RequestProgress() {
    etcdserverpb::WatchRequest request;
    request.mutable_progress_request();
    return Send(request);
  }
};

}  // namespace epoch::client
