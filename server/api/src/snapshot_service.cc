#include "snapshot_service.h"

#include <spdlog/spdlog.h>

#include <mutex>

#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

// Cancels the call when one message stays unsent for the timeout: a client that stops reading
// fills gRPC's flow-control window, and the pending write then never completes. Shared with the
// timer's handler, which may run after the reactor is gone.
class WriteWatchdog {
 public:
  WriteWatchdog(asio::thread_pool& pool, rpc::CallContext* ctx, SnapshotManager& snapshots)
      : timer_(pool), ctx_(ctx), snapshots_(snapshots) {}

  // A write starts: the call is cancelled unless Disarm comes within `timeout`.
  static void Arm(const std::shared_ptr<WriteWatchdog>& self, std::chrono::milliseconds timeout) {
    std::lock_guard lock(self->mu_);
    const std::uint64_t generation = ++self->generation_;
    self->timer_.expires_after(timeout);
    self->timer_.async_wait([self, generation, timeout](std::error_code ec) {
      if (ec) return;
      std::lock_guard held(self->mu_);
      if (self->ctx_ == nullptr || self->generation_ != generation) return;
      spdlog::warn("snapshot stream to {} cancelled: no message read for {} ms", self->ctx_->peer(),
                   timeout.count());
      self->snapshots_.CountArchiveStreamCut();
      self->ctx_->TryCancel();
    });
  }

  // The write completed.
  void Disarm() {
    std::lock_guard lock(mu_);
    ++generation_;
    timer_.cancel();
  }

  // The call is over: its context must not be touched any more.
  void Detach() {
    std::lock_guard lock(mu_);
    ctx_ = nullptr;
    timer_.cancel();
  }

 private:
  std::mutex mu_;
  asio::steady_timer timer_;      // guarded by mu_
  rpc::CallContext* ctx_;         // guarded by mu_; null after Detach
  std::uint64_t generation_ = 0;  // guarded by mu_; the armed write
  SnapshotManager& snapshots_;
};

class SnapshotStreamReactor final : public rpc::WriteReactor<etcdserverpb::SnapshotResponse> {
 public:
  SnapshotStreamReactor(NodeContext& node, SnapshotManager& snapshots, rpc::CallContext* ctx,
                        std::size_t message_bytes)
      : node_(node),
        message_bytes_(message_bytes),
        write_timeout_(snapshots.options().archive_write_timeout),
        watchdog_(std::make_shared<WriteWatchdog>(node.read_pool(), ctx, snapshots)) {
    // Every path below ends in StartWrite or Finish, so the reactor lives until OnDone.
    snapshots.OpenArchive([this](Result<std::shared_ptr<SnapshotArchiveStream>> stream) {
      if (!stream.ok()) return Finish(ToGrpc(stream.status()));
      stream_ = std::move(*stream);
      spdlog::info("snapshot stream: archive of applied index {} ({} bytes)",
                   stream_->checkpoint->applied, stream_->writer.TotalBytes());
      // Off the driver's strand: the first piece reads checkpoint files.
      asio::post(node_.read_pool(), [this] { WriteNext(); });
    });
  }

  void OnWriteDone(bool ok) override {
    watchdog_->Disarm();
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "snapshot stream broken"));
    // The next piece reads files: not on the thread that serves every client call.
    asio::post(node_.read_pool(), [this] { WriteNext(); });
  }

  void OnDone() override {
    watchdog_->Detach();
    delete this;
  }

 private:
  void WriteNext() {
    if (stream_->writer.Done()) return Finish(grpc::Status::OK);
    Result<std::string> piece = stream_->writer.Next(message_bytes_);
    if (!piece.ok()) {
      spdlog::error("snapshot stream failed: {}", piece.status().ToString());
      return Finish(grpc::Status(grpc::StatusCode::INTERNAL, piece.status().message()));
    }
    response_.Clear();
    if (first_) node_.FillHeader(response_.mutable_header());
    first_ = false;
    response_.set_remaining_bytes(stream_->writer.TotalBytes() - stream_->writer.BytesProduced());
    response_.set_blob(std::move(*piece));
    WriteWatchdog::Arm(watchdog_, write_timeout_);
    StartWrite(&response_);
  }

  NodeContext& node_;
  const std::size_t message_bytes_;
  const std::chrono::milliseconds write_timeout_;
  const std::shared_ptr<WriteWatchdog> watchdog_;
  std::shared_ptr<SnapshotArchiveStream> stream_;
  etcdserverpb::SnapshotResponse response_;
  bool first_ = true;
};

}  // namespace

rpc::WriteReactor<etcdserverpb::SnapshotResponse>* StartSnapshotStream(NodeContext& node,
                                                                       SnapshotManager& snapshots,
                                                                       rpc::CallContext* ctx,
                                                                       std::size_t message_bytes) {
  return new SnapshotStreamReactor(node, snapshots, ctx, message_bytes);
}

}  // namespace epoch::server
