// Alarms and the space quota's apply-side rules (etcd's alarm store and applierV3Capped).
//
// An alarm (member, type) is part of the replicated state (KvStore::Meta::alarms): it is raised
// and cleared by Raft entries (InternalRequest.alarm), so every replica caps its store at the
// same log index. While a NOSPACE alarm is active, the requests that need space — a put, a txn
// with a put in any branch at any depth, a lease grant — fail with etcd_errors::kNoSpace
// ("database space exceeded"); reads, deletes, compactions, revokes and keep-alives go on, so an
// operator can free space and disarm (server/README.md "Alarms and the space quota").
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/state/kv_store.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

// Bytes `request` would add to the store, roughly (etcd's quota cost: the request plus a fixed
// overhead per put or lease); 0 for a request that needs no space (delete, compaction, …).
[[nodiscard]] std::size_t SpaceCost(const v1::InternalRequest& request);

[[nodiscard]] bool HasAlarm(const std::vector<StoreAlarm>& alarms, etcdserverpb::AlarmType type);
[[nodiscard]] bool HasAlarm(const std::vector<StoreAlarm>& alarms, StoreAlarm alarm);

// An ACTIVATE or DEACTIVATE that may be proposed: a member ID and, for ACTIVATE, the NOSPACE
// type (Epoch has no corruption checker, so CORRUPT is never raised and cannot be cleared by a
// wrong guess either). InvalidArgument with a message that says what is wrong otherwise.
Status ValidateAlarmChange(const etcdserverpb::AlarmRequest& request);

// Applies an ACTIVATE or DEACTIVATE to `alarms` (kept sorted). The response lists the alarm that
// was added or removed, nothing if it was already active / not active (as etcd's).
void ApplyAlarmChange(const etcdserverpb::AlarmRequest& request, std::vector<StoreAlarm>* alarms,
                      etcdserverpb::AlarmResponse* response);

// The alarms of `type` (NONE: all), as Maintenance.Alarm GET answers them.
void ListAlarms(const std::vector<StoreAlarm>& alarms, etcdserverpb::AlarmType type,
                etcdserverpb::AlarmResponse* response);

// "memberID:<id> alarm:NOSPACE", as etcd writes an alarm into StatusResponse.errors.
[[nodiscard]] std::string AlarmText(const StoreAlarm& alarm);

}  // namespace epoch::server
