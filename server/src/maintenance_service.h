// MaintenanceService (etcdserverpb.Maintenance) and ClusterService (etcdserverpb.Cluster): what
// `etcdctl endpoint status/health`, `move-leader`, `alarm list` and `member list` need.
// Snapshot, Defragment and membership changes are answered as unimplemented until they exist.
#pragma once

#include "epoch/server/node_context.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

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
  grpc::ServerUnaryReactor* HashKV(grpc::CallbackServerContext* ctx,
                                   const etcdserverpb::HashKVRequest* request,
                                   etcdserverpb::HashKVResponse* response) override;
  grpc::ServerUnaryReactor* MoveLeader(grpc::CallbackServerContext* ctx,
                                       const etcdserverpb::MoveLeaderRequest* request,
                                       etcdserverpb::MoveLeaderResponse* response) override;

 private:
  NodeContext& node_;
};

class ClusterService final : public etcdserverpb::Cluster::CallbackService {
 public:
  explicit ClusterService(NodeContext& node) : node_(node) {}

  grpc::ServerUnaryReactor* MemberList(grpc::CallbackServerContext* ctx,
                                       const etcdserverpb::MemberListRequest* request,
                                       etcdserverpb::MemberListResponse* response) override;

 private:
  NodeContext& node_;
};

}  // namespace epoch::server
