// MaintenanceService (etcdserverpb.Maintenance) and ClusterService (etcdserverpb.Cluster): what
// `etcdctl endpoint status/health`, `move-leader`, `alarm list` and `member list` need.
// Snapshot streams an archive of a checkpoint (snapshot_service.h). Alarm lists, raises and
// clears the replicated alarms (alarms.h, space_quota.h); Defragment compacts this member's
// store whole. Membership changes are answered as unimplemented until they exist.
#pragma once

#include <asio.hpp>

#include "epoch/server/node_context.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class SnapshotManager;

// The etcd API version we speak (what `etcdctl endpoint status` shows as VERSION).
inline constexpr char kEtcdApiVersion[] = "3.5.0";

class MaintenanceService final : public etcdserverpb::Maintenance::CallbackService {
 public:
  explicit MaintenanceService(NodeContext& node) : node_(node) {}

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx,
                                   const etcdserverpb::StatusRequest* request,
                                   etcdserverpb::StatusResponse* response) override;
  grpc::ServerUnaryReactor* Alarm(grpc::CallbackServerContext* ctx,
                                  const etcdserverpb::AlarmRequest* request,
                                  etcdserverpb::AlarmResponse* response) override;
  grpc::ServerUnaryReactor* Defragment(grpc::CallbackServerContext* ctx,
                                       const etcdserverpb::DefragmentRequest* request,
                                       etcdserverpb::DefragmentResponse* response) override;
  grpc::ServerUnaryReactor* HashKV(grpc::CallbackServerContext* ctx,
                                   const etcdserverpb::HashKVRequest* request,
                                   etcdserverpb::HashKVResponse* response) override;
  grpc::ServerUnaryReactor* MoveLeader(grpc::CallbackServerContext* ctx,
                                       const etcdserverpb::MoveLeaderRequest* request,
                                       etcdserverpb::MoveLeaderResponse* response) override;
  grpc::ServerWriteReactor<etcdserverpb::SnapshotResponse>* Snapshot(
      grpc::CallbackServerContext* ctx, const etcdserverpb::SnapshotRequest* request) override;

  // Before the service is registered. Without it, Snapshot answers UNIMPLEMENTED.
  void SetSnapshots(SnapshotManager* snapshots, std::size_t message_bytes) {
    snapshots_ = snapshots;
    snapshot_message_bytes_ = message_bytes;
  }

 private:
  NodeContext& node_;
  SnapshotManager* snapshots_ = nullptr;
  std::size_t snapshot_message_bytes_ = 64 << 10;
  // Runs Defragment calls one at a time; joined when the service is destroyed (after the gRPC
  // server's shutdown, which waits for the pending calls to finish).
  asio::thread_pool defrag_pool_{1};
};

class ClusterService final : public etcdserverpb::Cluster::CallbackService {
 public:
  explicit ClusterService(NodeContext& node) : node_(node) {}

  grpc::ServerUnaryReactor* MemberList(grpc::CallbackServerContext* ctx,
                                       const etcdserverpb::MemberListRequest* request,
                                       etcdserverpb::MemberListResponse* response) override;
  // Membership is fixed by --initial-cluster for now: these answer UNIMPLEMENTED with a message
  // that says so (gRPC's default UNIMPLEMENTED carries none).
  grpc::ServerUnaryReactor* MemberAdd(grpc::CallbackServerContext* ctx,
                                      const etcdserverpb::MemberAddRequest* request,
                                      etcdserverpb::MemberAddResponse* response) override;
  grpc::ServerUnaryReactor* MemberRemove(grpc::CallbackServerContext* ctx,
                                         const etcdserverpb::MemberRemoveRequest* request,
                                         etcdserverpb::MemberRemoveResponse* response) override;
  grpc::ServerUnaryReactor* MemberUpdate(grpc::CallbackServerContext* ctx,
                                         const etcdserverpb::MemberUpdateRequest* request,
                                         etcdserverpb::MemberUpdateResponse* response) override;
  grpc::ServerUnaryReactor* MemberPromote(grpc::CallbackServerContext* ctx,
                                          const etcdserverpb::MemberPromoteRequest* request,
                                          etcdserverpb::MemberPromoteResponse* response) override;

 private:
  NodeContext& node_;
};

}  // namespace epoch::server
