// MaintenanceService (etcdserverpb.Maintenance): what `etcdctl endpoint status/health`,
// `move-leader`, `alarm list`, `snapshot save` and `defrag` need. Snapshot streams an archive of
// a checkpoint (snapshot_service.h). Alarm lists, raises and clears the replicated alarms
// (alarms.h, space_quota.h); Defragment compacts this member's store whole. The Cluster service
// is in cluster_service.h.
#pragma once

#include <asio.hpp>

#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class SnapshotManager;

// The etcd API version Epoch speaks, etcd 3.4's (what `etcdctl endpoint status` shows as VERSION,
// `GET /version` and `etcd_server_version` report): clients that choose a protocol by version,
// such as Patroni, take their etcd 3.4 path.
inline constexpr char kEtcdApiVersion[] = "3.4.0";

class MaintenanceService final : public etcdserverpb::Maintenance::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  // Snapshot streams the archive of `snapshots` in messages of `snapshot_message_bytes`;
  // Defragment runs on `maintenance`, one at a time (a pool of one thread).
  MaintenanceService(NodeContext& node, SnapshotManager& snapshots,
                     std::size_t snapshot_message_bytes, asio::thread_pool& maintenance)
      : node_(node),
        snapshots_(snapshots),
        snapshot_message_bytes_(snapshot_message_bytes),
        maintenance_(maintenance) {}

  rpc::UnaryReactor* Status(rpc::CallContext* ctx, const etcdserverpb::StatusRequest* request,
                            etcdserverpb::StatusResponse* response);
  rpc::UnaryReactor* Alarm(rpc::CallContext* ctx, const etcdserverpb::AlarmRequest* request,
                           etcdserverpb::AlarmResponse* response);
  rpc::UnaryReactor* Defragment(rpc::CallContext* ctx,
                                const etcdserverpb::DefragmentRequest* request,
                                etcdserverpb::DefragmentResponse* response);
  rpc::UnaryReactor* HashKV(rpc::CallContext* ctx, const etcdserverpb::HashKVRequest* request,
                            etcdserverpb::HashKVResponse* response);
  rpc::UnaryReactor* MoveLeader(rpc::CallContext* ctx,
                                const etcdserverpb::MoveLeaderRequest* request,
                                etcdserverpb::MoveLeaderResponse* response);
  rpc::WriteReactor<etcdserverpb::SnapshotResponse>* Snapshot(
      rpc::CallContext* ctx, const etcdserverpb::SnapshotRequest* request);

 private:
  NodeContext& node_;
  SnapshotManager& snapshots_;
  const std::size_t snapshot_message_bytes_;
  asio::thread_pool& maintenance_;
};

}  // namespace epoch::server
