// etcdctl 3.4's `-w fields` output: one `"Name" : value` line per field, strings in Go's %q
// quoting, header fields first, a blank line after each member, endpoint or alarm.
//
// Threading: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "etcdserverpb/rpc.pb.h"
#include "mvccpb/kv.pb.h"

namespace epoch::ctl {

// A string as Go's strconv.Quote writes it (\x for invalid bytes and control characters).
std::string GoQuote(std::string_view text);

std::string FieldsOf(const etcdserverpb::RangeResponse& r);
std::string FieldsOf(const etcdserverpb::PutResponse& r);
std::string FieldsOf(const etcdserverpb::DeleteRangeResponse& r);
std::string FieldsOf(const etcdserverpb::TxnResponse& r);
std::string FieldsOf(const etcdserverpb::WatchResponse& r);
std::string FieldsOf(const etcdserverpb::LeaseRevokeResponse& r);
std::string FieldsOf(const etcdserverpb::LeaseTimeToLiveResponse& r);
std::string FieldsOf(const etcdserverpb::LeaseLeasesResponse& r);
std::string FieldsOf(const etcdserverpb::MemberListResponse& r);
std::string FieldsOf(const etcdserverpb::AlarmResponse& r);
// The Auth service: the header alone for changes; a role's permissions; the role names. etcdctl
// has no fields printer for user get / user list (refused by PrintMachine).
std::string FieldsOf(const etcdserverpb::AuthUserAddResponse& r);
std::string FieldsOf(const etcdserverpb::AuthUserDeleteResponse& r);
std::string FieldsOf(const etcdserverpb::AuthUserChangePasswordResponse& r);
std::string FieldsOf(const etcdserverpb::AuthUserGrantRoleResponse& r);
std::string FieldsOf(const etcdserverpb::AuthUserRevokeRoleResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleAddResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleDeleteResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleGrantPermissionResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleRevokePermissionResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleGetResponse& r);
std::string FieldsOf(const etcdserverpb::AuthRoleListResponse& r);
// etcdctl 3.5's `auth status` (3.4 has no such command).
std::string FieldsOf(const etcdserverpb::AuthStatusResponse& r);
// Lease grant and keep-alive share clientv3's shape: the header, "ID" and "TTL".
std::string FieldsOfLease(const etcdserverpb::ResponseHeader& header, std::int64_t id,
                          std::int64_t ttl);

struct EndpointStatus {
  std::string endpoint;
  etcdserverpb::StatusResponse status;
};
std::string FieldsOf(const std::vector<EndpointStatus>& statuses);

struct EndpointHealth {
  std::string endpoint;
  bool health = false;
  std::string took;  // Go duration text
  std::string error;
};
std::string FieldsOf(const std::vector<EndpointHealth>& healths);

struct EndpointHashKV {
  std::string endpoint;
  etcdserverpb::HashKVResponse hash;
};
std::string FieldsOf(const std::vector<EndpointHashKV>& hashes);

}  // namespace epoch::ctl
