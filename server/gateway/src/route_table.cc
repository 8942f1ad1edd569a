#include "epoch/gateway/route_table.h"

#include <array>

#include "etcdserverpb/rpc.pb.h"
#include "v3electionpb/v3election.pb.h"
#include "v3lockpb/v3lock.pb.h"

namespace epoch::gateway {
namespace {

namespace ep = etcdserverpb;
namespace el = v3electionpb;
namespace lk = v3lockpb;

constexpr std::array<std::string_view, 3> kPrefixes = {"/v3/", "/v3beta/", "/v3alpha/"};

template <typename Req, typename Resp>
constexpr Route R(std::string_view path, std::string_view method,
                  CallShape shape = CallShape::kUnary) {
  return Route{path, method, &Req::descriptor, &Resp::descriptor, shape};
}

// etcd 3.4's google.api.http bindings. HashKV is bound to maintenance/hash in etcd's proto, where
// Hash's binding shadows it; Epoch serves it at maintenance/hashkv. auth/status is etcd 3.5's.
const std::array kRoutes = {
    R<ep::RangeRequest, ep::RangeResponse>("kv/range", "/etcdserverpb.KV/Range"),
    R<ep::PutRequest, ep::PutResponse>("kv/put", "/etcdserverpb.KV/Put"),
    R<ep::DeleteRangeRequest, ep::DeleteRangeResponse>("kv/deleterange",
                                                       "/etcdserverpb.KV/DeleteRange"),
    R<ep::TxnRequest, ep::TxnResponse>("kv/txn", "/etcdserverpb.KV/Txn"),
    R<ep::CompactionRequest, ep::CompactionResponse>("kv/compaction", "/etcdserverpb.KV/Compact"),
    R<ep::WatchRequest, ep::WatchResponse>("watch", "/etcdserverpb.Watch/Watch",
                                           CallShape::kBidiStream),
    R<ep::LeaseGrantRequest, ep::LeaseGrantResponse>("lease/grant",
                                                     "/etcdserverpb.Lease/LeaseGrant"),
    R<ep::LeaseRevokeRequest, ep::LeaseRevokeResponse>("lease/revoke",
                                                       "/etcdserverpb.Lease/LeaseRevoke"),
    R<ep::LeaseRevokeRequest, ep::LeaseRevokeResponse>("kv/lease/revoke",
                                                       "/etcdserverpb.Lease/LeaseRevoke"),
    R<ep::LeaseKeepAliveRequest, ep::LeaseKeepAliveResponse>(
        "lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive", CallShape::kBidiStream),
    R<ep::LeaseTimeToLiveRequest, ep::LeaseTimeToLiveResponse>(
        "lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive"),
    R<ep::LeaseTimeToLiveRequest, ep::LeaseTimeToLiveResponse>(
        "kv/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive"),
    R<ep::LeaseLeasesRequest, ep::LeaseLeasesResponse>("lease/leases",
                                                       "/etcdserverpb.Lease/LeaseLeases"),
    R<ep::LeaseLeasesRequest, ep::LeaseLeasesResponse>("kv/lease/leases",
                                                       "/etcdserverpb.Lease/LeaseLeases"),
    R<ep::MemberAddRequest, ep::MemberAddResponse>("cluster/member/add",
                                                   "/etcdserverpb.Cluster/MemberAdd"),
    R<ep::MemberRemoveRequest, ep::MemberRemoveResponse>("cluster/member/remove",
                                                         "/etcdserverpb.Cluster/MemberRemove"),
    R<ep::MemberUpdateRequest, ep::MemberUpdateResponse>("cluster/member/update",
                                                         "/etcdserverpb.Cluster/MemberUpdate"),
    R<ep::MemberListRequest, ep::MemberListResponse>("cluster/member/list",
                                                     "/etcdserverpb.Cluster/MemberList"),
    R<ep::MemberPromoteRequest, ep::MemberPromoteResponse>("cluster/member/promote",
                                                           "/etcdserverpb.Cluster/MemberPromote"),
    R<ep::AlarmRequest, ep::AlarmResponse>("maintenance/alarm", "/etcdserverpb.Maintenance/Alarm"),
    R<ep::StatusRequest, ep::StatusResponse>("maintenance/status",
                                             "/etcdserverpb.Maintenance/Status"),
    R<ep::DefragmentRequest, ep::DefragmentResponse>("maintenance/defragment",
                                                     "/etcdserverpb.Maintenance/Defragment"),
    R<ep::HashRequest, ep::HashResponse>("maintenance/hash", "/etcdserverpb.Maintenance/Hash"),
    R<ep::HashKVRequest, ep::HashKVResponse>("maintenance/hashkv",
                                             "/etcdserverpb.Maintenance/HashKV"),
    R<ep::SnapshotRequest, ep::SnapshotResponse>(
        "maintenance/snapshot", "/etcdserverpb.Maintenance/Snapshot", CallShape::kServerStream),
    R<ep::MoveLeaderRequest, ep::MoveLeaderResponse>("maintenance/transfer-leadership",
                                                     "/etcdserverpb.Maintenance/MoveLeader"),
    R<ep::AuthEnableRequest, ep::AuthEnableResponse>("auth/enable",
                                                     "/etcdserverpb.Auth/AuthEnable"),
    R<ep::AuthDisableRequest, ep::AuthDisableResponse>("auth/disable",
                                                       "/etcdserverpb.Auth/AuthDisable"),
    R<ep::AuthStatusRequest, ep::AuthStatusResponse>("auth/status",
                                                     "/etcdserverpb.Auth/AuthStatus"),
    R<ep::AuthenticateRequest, ep::AuthenticateResponse>("auth/authenticate",
                                                         "/etcdserverpb.Auth/Authenticate"),
    R<ep::AuthUserAddRequest, ep::AuthUserAddResponse>("auth/user/add",
                                                       "/etcdserverpb.Auth/UserAdd"),
    R<ep::AuthUserGetRequest, ep::AuthUserGetResponse>("auth/user/get",
                                                       "/etcdserverpb.Auth/UserGet"),
    R<ep::AuthUserListRequest, ep::AuthUserListResponse>("auth/user/list",
                                                         "/etcdserverpb.Auth/UserList"),
    R<ep::AuthUserDeleteRequest, ep::AuthUserDeleteResponse>("auth/user/delete",
                                                             "/etcdserverpb.Auth/UserDelete"),
    R<ep::AuthUserChangePasswordRequest, ep::AuthUserChangePasswordResponse>(
        "auth/user/changepw", "/etcdserverpb.Auth/UserChangePassword"),
    R<ep::AuthUserGrantRoleRequest, ep::AuthUserGrantRoleResponse>(
        "auth/user/grant", "/etcdserverpb.Auth/UserGrantRole"),
    R<ep::AuthUserRevokeRoleRequest, ep::AuthUserRevokeRoleResponse>(
        "auth/user/revoke", "/etcdserverpb.Auth/UserRevokeRole"),
    R<ep::AuthRoleAddRequest, ep::AuthRoleAddResponse>("auth/role/add",
                                                       "/etcdserverpb.Auth/RoleAdd"),
    R<ep::AuthRoleGetRequest, ep::AuthRoleGetResponse>("auth/role/get",
                                                       "/etcdserverpb.Auth/RoleGet"),
    R<ep::AuthRoleListRequest, ep::AuthRoleListResponse>("auth/role/list",
                                                         "/etcdserverpb.Auth/RoleList"),
    R<ep::AuthRoleDeleteRequest, ep::AuthRoleDeleteResponse>("auth/role/delete",
                                                             "/etcdserverpb.Auth/RoleDelete"),
    R<ep::AuthRoleGrantPermissionRequest, ep::AuthRoleGrantPermissionResponse>(
        "auth/role/grant", "/etcdserverpb.Auth/RoleGrantPermission"),
    R<ep::AuthRoleRevokePermissionRequest, ep::AuthRoleRevokePermissionResponse>(
        "auth/role/revoke", "/etcdserverpb.Auth/RoleRevokePermission"),
    R<lk::LockRequest, lk::LockResponse>("lock/lock", "/v3lockpb.Lock/Lock"),
    R<lk::UnlockRequest, lk::UnlockResponse>("lock/unlock", "/v3lockpb.Lock/Unlock"),
    R<el::CampaignRequest, el::CampaignResponse>("election/campaign",
                                                 "/v3electionpb.Election/Campaign"),
    R<el::ProclaimRequest, el::ProclaimResponse>("election/proclaim",
                                                 "/v3electionpb.Election/Proclaim"),
    R<el::LeaderRequest, el::LeaderResponse>("election/leader", "/v3electionpb.Election/Leader"),
    R<el::LeaderRequest, el::LeaderResponse>("election/observe", "/v3electionpb.Election/Observe",
                                             CallShape::kServerStream),
    R<el::ResignRequest, el::ResignResponse>("election/resign", "/v3electionpb.Election/Resign"),
};

// The path without its gateway prefix, or empty when it has none.
std::string_view StripPrefix(std::string_view http_path) {
  for (std::string_view prefix : kPrefixes) {
    if (http_path.starts_with(prefix)) return http_path.substr(prefix.size());
  }
  return {};
}

}  // namespace

std::span<const Route> Routes() { return kRoutes; }

bool IsGatewayPath(std::string_view http_path) { return !StripPrefix(http_path).empty(); }

const Route* FindRoute(std::string_view http_path) {
  const std::string_view path = StripPrefix(http_path);
  if (path.empty()) return nullptr;
  for (const Route& route : kRoutes) {
    if (route.path == path) return &route;
  }
  return nullptr;
}

}  // namespace epoch::gateway
