#include "epoch/state/alarms.h"

#include <fmt/format.h>

#include <algorithm>

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

// etcd's quota overheads (etcdserver/quota.go): per put, the key's index and revision records;
// per lease, its record.
constexpr std::size_t kPutOverhead = 256;
constexpr std::size_t kLeaseOverhead = 64;

std::size_t TxnCost(const pb::TxnRequest& txn) {
  std::size_t cost = 0;
  for (const auto* ops : {&txn.success(), &txn.failure()}) {
    for (const pb::RequestOp& op : *ops) {
      if (op.has_request_put()) cost += op.request_put().ByteSizeLong() + kPutOverhead;
      if (op.has_request_txn()) cost += TxnCost(op.request_txn());
    }
  }
  return cost;
}

}  // namespace

std::size_t SpaceCost(const v1::InternalRequest& request) {
  // Every kind listed (no default): a new request kind must say whether it needs space.
  switch (request.request_case()) {
    case v1::InternalRequest::kPut: return request.put().ByteSizeLong() + kPutOverhead;
    case v1::InternalRequest::kTxn: return TxnCost(request.txn());
    case v1::InternalRequest::kLeaseGrant: return kLeaseOverhead;
    case v1::InternalRequest::kDeleteRange:
    case v1::InternalRequest::kCompaction:
    case v1::InternalRequest::kLeaseRevoke:
    case v1::InternalRequest::kLeaseCheckpoint:
    case v1::InternalRequest::kClockTick:
    case v1::InternalRequest::kAlarm:
    case v1::InternalRequest::kMemberAttributes:
    // Cluster settings stay changeable under the alarm.
    case v1::InternalRequest::kClusterTiming:
    // Membership changes stay possible under the alarm (replacing a member frees no space).
    case v1::InternalRequest::kMemberChange:
    // The auth store is small and stays writable under the alarm, as etcd's.
    case v1::InternalRequest::kAuthEnable:
    case v1::InternalRequest::kAuthDisable:
    case v1::InternalRequest::kAuthenticate:
    case v1::InternalRequest::kAuthUserAdd:
    case v1::InternalRequest::kAuthUserDelete:
    case v1::InternalRequest::kAuthUserChangePassword:
    case v1::InternalRequest::kAuthUserGrantRole:
    case v1::InternalRequest::kAuthUserRevokeRole:
    case v1::InternalRequest::kAuthRoleAdd:
    case v1::InternalRequest::kAuthRoleDelete:
    case v1::InternalRequest::kAuthRoleGrantPermission:
    case v1::InternalRequest::kAuthRoleRevokePermission:
    case v1::InternalRequest::REQUEST_NOT_SET: return 0;
  }
  return 0;
}

bool HasAlarm(const std::vector<StoreAlarm>& alarms, pb::AlarmType type) {
  return std::any_of(alarms.begin(), alarms.end(),
                     [type](const StoreAlarm& a) { return a.type == type; });
}

bool HasAlarm(const std::vector<StoreAlarm>& alarms, StoreAlarm alarm) {
  return std::binary_search(alarms.begin(), alarms.end(), alarm);
}

Status ValidateAlarmChange(const pb::AlarmRequest& request) {
  switch (request.action()) {
    case pb::AlarmRequest::ACTIVATE:
      if (request.alarm() != pb::NOSPACE) {
        return Status::InvalidArgument(
            fmt::format("epoch: only a NOSPACE alarm can be activated (got {})",
                        pb::AlarmType_Name(request.alarm())));
      }
      break;
    case pb::AlarmRequest::DEACTIVATE:
      if (request.alarm() == pb::NONE) {
        return Status::InvalidArgument("epoch: say which alarm type to deactivate");
      }
      break;
    default: return Status::InvalidArgument("epoch: not an alarm change (ACTIVATE, DEACTIVATE)");
  }
  if (request.memberid() == 0) return Status::InvalidArgument("epoch: an alarm needs a member ID");
  return Status::Ok();
}

void ApplyAlarmChange(const pb::AlarmRequest& request, std::vector<StoreAlarm>* alarms,
                      pb::AlarmResponse* response) {
  const StoreAlarm alarm{request.memberid(), request.alarm()};
  auto at = std::lower_bound(alarms->begin(), alarms->end(), alarm);
  const bool active = at != alarms->end() && *at == alarm;
  if (request.action() == pb::AlarmRequest::ACTIVATE) {
    if (active) return;
    alarms->insert(at, alarm);
  } else {
    if (!active) return;
    alarms->erase(at);
  }
  pb::AlarmMember* m = response->add_alarms();
  m->set_memberid(alarm.member);
  m->set_alarm(alarm.type);
}

void ListAlarms(const std::vector<StoreAlarm>& alarms, pb::AlarmType type,
                pb::AlarmResponse* response) {
  for (const StoreAlarm& a : alarms) {
    if (type != pb::NONE && a.type != type) continue;
    pb::AlarmMember* m = response->add_alarms();
    m->set_memberid(a.member);
    m->set_alarm(a.type);
  }
}

std::string AlarmText(const StoreAlarm& alarm) {
  return fmt::format("memberID:{} alarm:{}", alarm.member, pb::AlarmType_Name(alarm.type));
}

}  // namespace epoch::server
