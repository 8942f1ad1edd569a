#include "snapshot_service.h"

#include <spdlog/spdlog.h>

#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

class SnapshotStreamReactor final : public rpc::WriteReactor<etcdserverpb::SnapshotResponse> {
 public:
  SnapshotStreamReactor(NodeContext& node, SnapshotManager& snapshots, std::size_t message_bytes)
      : node_(node), message_bytes_(message_bytes) {
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
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "snapshot stream broken"));
    // The next piece reads files: not on the thread that serves every client call.
    asio::post(node_.read_pool(), [this] { WriteNext(); });
  }

  void OnDone() override { delete this; }

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
    StartWrite(&response_);
  }

  NodeContext& node_;
  const std::size_t message_bytes_;
  std::shared_ptr<SnapshotArchiveStream> stream_;
  etcdserverpb::SnapshotResponse response_;
  bool first_ = true;
};

}  // namespace

rpc::WriteReactor<etcdserverpb::SnapshotResponse>* StartSnapshotStream(NodeContext& node,
                                                                       SnapshotManager& snapshots,
                                                                       std::size_t message_bytes) {
  return new SnapshotStreamReactor(node, snapshots, message_bytes);
}

}  // namespace epoch::server
