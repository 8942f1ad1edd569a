#include "entry_apply.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "epoch/etcd_errors.h"
#include "epoch/state/alarms.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/cluster_timing.h"
#include "epoch/state/kv_validation.h"
#include "epoch/state/member_table.h"
#include "epoch/state/published_members.h"
#include "idempotency.h"
#include "kv_apply.h"
#include "lease_table.h"
#include "write_txn.h"

namespace epoch::server {

namespace {

namespace pb = etcdserverpb;
using v1::InternalRequest;
using v1::InternalResponse;

// Sorts a failed Result into the request error (kept in the ApplyResult) or a storage failure.
template <typename T>
Status Classify(const Result<T>& r, ApplyResult* out) {
  if (r.ok()) return Status::Ok();
  if (IsStorageError(r.status())) return r.status();
  out->status = r.status();
  return Status::Ok();
}

// Runs one KV write (`fn` gets the applier) at the next revision; commits the revision to `meta`
// only on success. `bound`: KvApplier's bound on a Txn's reads.
template <typename Fn>
Status ApplyKvWrite(const EntryContext& ctx, KvStore::Meta* meta, ApplyResult* out, Fn fn,
                    TxnReadBound bound = {}) {
  WriteTxn txn(ctx.reader, ctx.batch, ctx.index, meta->revision, ctx.latest, ctx.prev_values);
  KvApplier applier(ReadContext{ctx.reader, meta->revision, meta->compact_revision}, &txn, bound);
  auto result = fn(applier);
  EPOCH_RETURN_IF_ERROR(Classify(result, out));
  if (!out->status.ok()) return Status::Ok();
  meta->revision = txn.current();
  out->events = txn.TakeEvents();
  return result.status();
}

Status ApplyCompaction(const EntryContext& ctx, KvStore::Meta* meta,
                       const pb::CompactionRequest& req, ApplyResult* out) {
  const Revision target(req.revision());
  if (target <= meta->compact_revision) {
    out->status = etcd_errors::kCompacted.ToStatus();
    return Status::Ok();
  }
  if (target > meta->revision) {
    out->status = etcd_errors::kFutureRev.ToStatus();
    return Status::Ok();
  }
  // Logical only (compaction.h): the batch records the compact revision, so reads below it fail
  // from this batch on, on every replica; the store's compactor removes what it supersedes.
  ctx.index->StageCompaction(target);
  meta->compact_revision = target;
  out->response.mutable_compaction()->mutable_header()->set_revision(meta->revision.value());
  return Status::Ok();
}

Status ApplyKvRequest(const EntryContext& ctx, KvStore::Meta* meta, const InternalRequest& req,
                      ApplyResult* out) {
  InternalResponse& resp = out->response;
  switch (req.request_case()) {
    case InternalRequest::kPut:
      out->status = ValidatePut(req.put());
      if (!out->status.ok()) return Status::Ok();
      return ApplyKvWrite(ctx, meta, out, [&](KvApplier& a) {
        Result<pb::PutResponse> r = a.Put(req.put());
        if (r.ok()) *resp.mutable_put() = std::move(*r);
        return r;
      });
    case InternalRequest::kDeleteRange:
      out->status = ValidateDeleteRange(req.delete_range());
      if (!out->status.ok()) return Status::Ok();
      return ApplyKvWrite(ctx, meta, out, [&](KvApplier& a) {
        Result<pb::DeleteRangeResponse> r = a.DeleteRange(req.delete_range());
        if (r.ok()) *resp.mutable_delete_range() = std::move(*r);
        return r;
      });
    case InternalRequest::kTxn:
      out->status = ValidateTxn(req.txn(), ctx.options->limits);
      if (!out->status.ok()) return Status::Ok();
      return ApplyKvWrite(
          ctx, meta, out,
          [&](KvApplier& a) {
            Result<pb::TxnResponse> r = a.Txn(req.txn());
            if (r.ok()) *resp.mutable_txn() = std::move(*r);
            return r;
          },
          TxnReadBound::Of(req));
    case InternalRequest::kCompaction: return ApplyCompaction(ctx, meta, req.compaction(), out);
    default: break;
  }
  return Status::InvalidArgument("not a KV request");
}

// A client's revoke (stamped by its proposer) needs write permission on every key attached at
// apply: keys may have been attached since the proposer checked, without the auth revision
// moving. The server's own revokes (expiry) carry no stamp. A storage error is returned, a
// refusal lands in out->status.
Status CheckRevokePermission(const EntryContext& ctx, const KvStore::Meta& meta,
                             const InternalRequest& req, ApplyResult* out) {
  if (req.auth_revision() == 0 || !meta.auth->enabled) return Status::Ok();
  Result<std::vector<std::string>> keys =
      ReadLeaseKeys(*ctx.reader, LeaseId(req.lease_revoke().id()));
  if (!keys.ok()) return keys.status();
  out->status = CheckKeysPermission(*meta.auth, req.auth_user(), AuthAccess::kWrite, *keys);
  return Status::Ok();
}

Status ApplyLeaseRequest(const EntryContext& ctx, KvStore::Meta* meta, const InternalRequest& req,
                         ApplyResult* out) {
  InternalResponse& resp = out->response;
  const std::int64_t now_ms = meta->cluster_time_ms;
  switch (req.request_case()) {
    case InternalRequest::kLeaseGrant: {
      Result<v1::LeaseGrantResult> r = ApplyLeaseGrant(*ctx.reader, ctx.batch, req.lease_grant(),
                                                       now_ms, ctx.options->max_lease_ttl_ms);
      EPOCH_RETURN_IF_ERROR(Classify(r, out));
      if (r.ok()) *resp.mutable_lease_grant() = std::move(*r);
      break;
    }
    case InternalRequest::kLeaseRevoke: {
      EPOCH_RETURN_IF_ERROR(CheckRevokePermission(ctx, *meta, req, out));
      if (!out->status.ok()) return Status::Ok();
      WriteTxn txn(ctx.reader, ctx.batch, ctx.index, meta->revision, ctx.latest, ctx.prev_values);
      Result<pb::LeaseRevokeResponse> r =
          ApplyLeaseRevoke(*ctx.reader, ctx.batch, &txn, LeaseId(req.lease_revoke().id()));
      EPOCH_RETURN_IF_ERROR(Classify(r, out));
      if (!r.ok()) return Status::Ok();
      *resp.mutable_lease_revoke() = std::move(*r);
      meta->revision = txn.current();
      out->events = txn.TakeEvents();
      return Status::Ok();
    }
    case InternalRequest::kLeaseCheckpoint: {
      Result<v1::LeaseRenewalsResponse> r =
          ApplyLeaseRenewals(*ctx.reader, ctx.batch, req.lease_checkpoint(), now_ms);
      EPOCH_RETURN_IF_ERROR(Classify(r, out));
      if (r.ok()) *resp.mutable_lease_checkpoint() = std::move(*r);
      break;
    }
    default: return Status::InvalidArgument("not a lease request");
  }
  return Status::Ok();
}

// Sets the header revision on responses that do not carry one of their own.
void FillHeaderRevision(Revision rev, InternalResponse* resp) {
  switch (resp->response_case()) {
    case InternalResponse::kLeaseGrant:
      resp->mutable_lease_grant()->mutable_header()->set_revision(rev.value());
      break;
    case InternalResponse::kLeaseCheckpoint:
      resp->mutable_lease_checkpoint()->mutable_header()->set_revision(rev.value());
      break;
    case InternalResponse::kClockTick:
      resp->mutable_clock_tick()->mutable_header()->set_revision(rev.value());
      break;
    case InternalResponse::kAlarm:
      resp->mutable_alarm()->mutable_header()->set_revision(rev.value());
      break;
    case InternalResponse::kAuth:
      resp->mutable_auth()->mutable_header()->set_revision(rev.value());
      break;
    default: break;
  }
}

// One log line per alarm raised or cleared (`changed` lists it; empty when nothing changed).
void LogAlarmChange(const pb::AlarmRequest& request, const pb::AlarmResponse& changed) {
  if (changed.alarms().empty()) return;
  const bool raised = request.action() == pb::AlarmRequest::ACTIVATE;
  SPDLOG_LOGGER_CALL(spdlog::default_logger_raw(),
                     raised ? spdlog::level::warn : spdlog::level::info,
                     "{} alarm={} alarm-member={:x}", raised ? "alarm raised" : "alarm cleared",
                     pb::AlarmType_Name(request.alarm()), request.memberid());
}

// Dispatch without the idempotency layer.
Status ApplyRequest(const EntryContext& ctx, KvStore::Meta* meta, const InternalRequest& req,
                    ApplyResult* out) {
  out->status = ValidateRequestSize(req.ByteSizeLong(), ctx.options->limits);
  if (!out->status.ok()) return Status::Ok();
  // The store is capped while a NOSPACE alarm is active (alarms.h).
  if (HasAlarm(meta->alarms, pb::NOSPACE) && SpaceCost(req) > 0) {
    out->status = etcd_errors::kNoSpace.ToStatus();
    return Status::Ok();
  }
  // Checked by its proposer against an auth state that has changed since: checked again.
  if (req.auth_revision() != 0 && req.auth_revision() != meta->auth->revision) {
    out->status = CheckRequestPermission(*meta->auth, req.auth_user(), req);
    if (!out->status.ok()) return Status::Ok();
  }
  if (IsAuthChange(req)) {
    out->status = ApplyAuthChange(meta->auth, req, meta->applied, meta->cluster_time_ms,
                                  &meta->auth, out->response.mutable_auth());
    return Status::Ok();
  }
  switch (req.request_case()) {
    case InternalRequest::kPut:
    case InternalRequest::kDeleteRange:
    case InternalRequest::kTxn:
    case InternalRequest::kCompaction: return ApplyKvRequest(ctx, meta, req, out);
    case InternalRequest::kLeaseGrant:
    case InternalRequest::kLeaseRevoke:
    case InternalRequest::kLeaseCheckpoint: return ApplyLeaseRequest(ctx, meta, req, out);
    case InternalRequest::kClockTick:
      out->response.mutable_clock_tick()->set_cluster_time_ms(meta->cluster_time_ms);
      return Status::Ok();
    case InternalRequest::kAlarm:
      out->status = ValidateAlarmChange(req.alarm());
      if (!out->status.ok()) return Status::Ok();
      ApplyAlarmChange(req.alarm(), &meta->alarms, out->response.mutable_alarm());
      LogAlarmChange(req.alarm(), out->response.alarm());
      return Status::Ok();
    case InternalRequest::kMemberAttributes:
      out->status = ValidateMemberAttributes(req.member_attributes());
      if (!out->status.ok()) return Status::Ok();
      meta->members = WithMember(*meta->members, req.member_attributes());
      return Status::Ok();
    case InternalRequest::kClusterTiming: {
      const ClusterTimingPtr& recorded = meta->cluster_timing;
      out->status = ValidateClusterTiming(req.cluster_timing().timing(), recorded.get());
      if (!out->status.ok()) return Status::Ok();
      bool changed = false;
      meta->cluster_timing =
          WithClusterTiming(recorded, req.cluster_timing(), meta->applied, &changed);
      v1::ClusterTimingResult* result = out->response.mutable_cluster_timing();
      *result->mutable_timing() = *meta->cluster_timing;
      result->set_changed(changed);
      if (changed) {
        spdlog::info("cluster timing recorded at index {}: {}", meta->applied.value(),
                     DescribeTiming(meta->cluster_timing->current()));
      }
      return Status::Ok();
    }
    case InternalRequest::kMemberChange:
      // Only ever the context of a kConfChange entry the Raft core applied by the same rules.
      out->status = MemberChangeApplies(*meta->member_table, req.member_change());
      if (!out->status.ok()) return Status::Ok();
      meta->member_table = WithMemberChange(*meta->member_table, req.member_change());
      *out->response.mutable_member_change()->mutable_members() = meta->member_table->members();
      return Status::Ok();
    case InternalRequest::REQUEST_NOT_SET: break;
    default: break;
  }
  out->status = Status::InvalidArgument("epoch: empty internal request");
  return Status::Ok();
}

Result<ApplyResult> Replay(const v1::StoredIdempotency& record, Revision rev) {
  ApplyResult out;
  out.revision = rev;
  if (!record.error_message().empty() || record.error_code() != 0) {
    // A stored record keeps the message, not the identity: recover it from the table.
    out.status = IdentifyEtcdError(
        Status::FromCode(static_cast<StatusCode>(record.error_code()), record.error_message()));
    return out;
  }
  if (!out.response.ParseFromString(record.response())) {
    return Status::Corruption("undecodable remembered response");
  }
  out.response.set_replayed(true);
  return out;
}

bool IsNoSpace(const Status& s) { return s.message() == etcd_errors::kNoSpace.message; }

bool TxnReadsHistory(const pb::TxnRequest& txn) {
  for (const auto* ops : {&txn.success(), &txn.failure()}) {
    for (const pb::RequestOp& op : *ops) {
      if (op.has_request_range() && op.request_range().revision() != 0) return true;
      if (op.has_request_txn() && TxnReadsHistory(op.request_txn())) return true;
    }
  }
  return false;
}

}  // namespace

bool ReadsHistory(const InternalRequest& request) {
  switch (request.request_case()) {
    case InternalRequest::kTxn: return TxnReadsHistory(request.txn());
    default: return false;
  }
}

Result<ApplyResult> ApplyEntry(const EntryContext& ctx, KvStore::Meta* meta,
                               const InternalRequest& req) {
  EPOCH_RETURN_IF_ERROR(PruneIdempotency(*ctx.reader, ctx.batch, meta->cluster_time_ms,
                                         ctx.options->idempotency_prune_per_apply,
                                         ctx.idempotency_hint));
  const std::optional<IdempotencyId> key = IdempotencyIdOf(req);
  IdempotencyDecision decision;
  if (key.has_value()) {
    Result<IdempotencyDecision> decided =
        DecideIdempotency(*ctx.reader, *key, req, meta->cluster_time_ms);
    if (!decided.ok()) return decided.status();
    decision = std::move(*decided);
    switch (decision.kind) {
      case IdempotencyDecision::Kind::kReplay: return Replay(decision.record, meta->revision);
      case IdempotencyDecision::Kind::kRefuse: {
        ApplyResult refused;
        refused.revision = meta->revision;
        refused.status = decision.refusal;
        return refused;
      }
      case IdempotencyDecision::Kind::kApply: break;
    }
  }

  ApplyResult out;
  KvStore::Meta next = *meta;
  ctx.batch->SetSavePoint();
  ctx.index->BeginEntry();
  EPOCH_RETURN_IF_ERROR(ApplyRequest(ctx, &next, req, &out));
  if (out.status.ok()) {
    EPOCH_RETURN_IF_ERROR(FromRocks(ctx.batch->PopSavePoint(), "pop save point"));
    if (ctx.latest != nullptr) ctx.latest->CommitEntry();
    *meta = next;
  } else {
    if (ctx.latest != nullptr) ctx.latest->RollbackEntry();
    ctx.index->RollbackEntry();
    EPOCH_RETURN_IF_ERROR(FromRocks(ctx.batch->RollbackToSavePoint(), "roll back request"));
    out.response.Clear();
    out.events.clear();
  }
  out.revision = meta->revision;
  FillHeaderRevision(meta->revision, &out.response);

  // A request the capped store refused did nothing: a retry after the alarm is cleared must
  // apply, not replay the refusal.
  if (key.has_value() && !IsNoSpace(out.status)) {
    std::int64_t ttl_ms = req.idempotency_ttl_ms() > 0 ? req.idempotency_ttl_ms()
                                                       : ctx.options->idempotency_default_ttl_ms;
    ttl_ms = std::min(ttl_ms, ctx.options->idempotency_max_ttl_ms);
    EPOCH_RETURN_IF_ERROR(RememberIdempotency(*ctx.reader, ctx.batch, *key, decision.expired,
                                              req.auth_user(), meta->cluster_time_ms + ttl_ms,
                                              out.response, out.status, ctx.idempotency_hint));
  }
  return out;
}

}  // namespace epoch::server
