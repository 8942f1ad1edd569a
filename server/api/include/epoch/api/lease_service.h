// The lease gRPC services — thin adapters over NodeContext (the write and read paths) and
// LeaseManager (keep-alives, the cluster clock):
//
// EtcdLeaseService is etcdserverpb.Lease, wire-compatible with etcd v3
// (docs/etcd-compatibility.md §2–3):
//   LeaseGrant: TTL in seconds, raised to the minimum TTL (etcd's minLeaseTTL, here 1.5 election
//     floors rounded up to whole seconds); above etcd's MaxLeaseTTL "too large lease TTL"; ID 0
//     means the leader picks a unique non-zero ID just before proposing; a requested ID is
//     honoured ("lease already exists" if taken). Written through the log; followers forward.
//   LeaseRevoke: through the log; every attached key is deleted in one revision with DELETE
//     events; "requested lease not found" for an unknown ID. With auth on, the caller needs write
//     permission on every attached key, checked here and again at apply on the keys attached
//     then (a follower forwards the stamped request over the peer link).
//   LeaseKeepAlive: KeepAliveStream; TTL = the granted TTL (seconds, rounded up) after renewing,
//     0 for an unknown or expired lease; the header is captured before renewing.
//   LeaseTimeToLive: after a linearizable read barrier; TTL = remaining seconds on the cluster
//     clock (truncated, as etcd does), -1 for an unknown lease (not an error); keys on request
//     (with auth on, read permission on every one, or "permission denied").
//   LeaseLeases: every lease ID after a read barrier.
// V1LeaseService is epoch.v1.Lease: the same leases in milliseconds, plus Status (deadline on the
// cluster clock, the maximum extension, attached keys with their fencing tokens), Renew (one
// keep-alive; what followers forward to the leader) and ClockStatus.
//
// Threading: async_rpc.h reactors; handlers do not block (work continues in callbacks on the
// driver's strand, the read pool or gRPC client threads).
#pragma once

#include "epoch/lease/lease_manager.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/rpc/client_peers.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

// etcd's MaxLeaseTTL (lease/lessor.go), seconds.
inline constexpr std::int64_t kMaxLeaseTtlSeconds = 9'000'000'000;

class EtcdLeaseService final : public etcdserverpb::Lease::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  // `client_peers` names the clients of connections gRPC knows by descriptor (keep-alive streams
  // are admitted per client address).
  EtcdLeaseService(NodeContext& node, LeaseManager& leases, const rpc::ClientPeers& client_peers)
      : node_(node), leases_(leases), client_peers_(client_peers) {}

  rpc::UnaryReactor* LeaseGrant(rpc::CallContext* ctx,
                                const etcdserverpb::LeaseGrantRequest* request,
                                etcdserverpb::LeaseGrantResponse* response);
  rpc::UnaryReactor* LeaseRevoke(rpc::CallContext* ctx,
                                 const etcdserverpb::LeaseRevokeRequest* request,
                                 etcdserverpb::LeaseRevokeResponse* response);
  rpc::BidiReactor<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse>*
  LeaseKeepAlive(rpc::CallContext* ctx);
  rpc::UnaryReactor* LeaseTimeToLive(rpc::CallContext* ctx,
                                     const etcdserverpb::LeaseTimeToLiveRequest* request,
                                     etcdserverpb::LeaseTimeToLiveResponse* response);
  rpc::UnaryReactor* LeaseLeases(rpc::CallContext* ctx,
                                 const etcdserverpb::LeaseLeasesRequest* request,
                                 etcdserverpb::LeaseLeasesResponse* response);

 private:
  NodeContext& node_;
  LeaseManager& leases_;
  const rpc::ClientPeers& client_peers_;
};

class V1LeaseService final : public v1::Lease::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  V1LeaseService(NodeContext& node, LeaseManager& leases, const rpc::ClientPeers& client_peers)
      : node_(node), leases_(leases), client_peers_(client_peers) {}

  rpc::UnaryReactor* Grant(rpc::CallContext* ctx, const v1::LeaseGrantRequest* request,
                           v1::LeaseGrantResponse* response);
  rpc::BidiReactor<v1::LeaseKeepAliveRequest, v1::LeaseKeepAliveResponse>* KeepAlive(
      rpc::CallContext* ctx);
  rpc::UnaryReactor* Renew(rpc::CallContext* ctx, const v1::LeaseKeepAliveRequest* request,
                           v1::LeaseKeepAliveResponse* response);
  rpc::UnaryReactor* Status(rpc::CallContext* ctx, const v1::LeaseStatusRequest* request,
                            v1::LeaseStatusResponse* response);
  rpc::UnaryReactor* ClockStatus(rpc::CallContext* ctx, const v1::ClockStatusRequest* request,
                                 v1::ClockStatusResponse* response);

 private:
  NodeContext& node_;
  LeaseManager& leases_;
  const rpc::ClientPeers& client_peers_;
};

}  // namespace epoch::server
