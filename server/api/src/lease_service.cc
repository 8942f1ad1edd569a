#include "epoch/api/lease_service.h"

#include <algorithm>

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "lease_keepalive_stream.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

bool IsForwarded(const rpc::CallContext* ctx) {
  return ctx->client_metadata().count(kForwardedMetadata) > 0;
}

// etcd's API counts TTLs in seconds; a sub-second remainder rounds up so a live lease never shows
// 0.
std::int64_t SecondsUp(std::int64_t ms) { return ms <= 0 ? 0 : (ms + 999) / 1000; }

rpc::UnaryReactor* FinishNow(rpc::CallContext* ctx, const grpc::Status& s) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

// Proposes `request` (or forwards it to the leader) and finishes with `fill(response)` applied to
// the response computed at apply time. A forwarded request is proposed here or refused: it never
// takes a second hop.
template <typename Fill>
rpc::UnaryReactor* WriteThroughLog(NodeContext& node, rpc::CallContext* ctx,
                                   v1::InternalRequest request, Fill fill) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  if (IsForwarded(ctx) && node.driver().status().role != raft::Role::kLeader) {
    reactor->Finish(ToGrpc(etcd_errors::kNotLeader));
    return reactor;
  }
  node.Write(std::move(request), ctx->deadline(),
             [reactor, fill](const Status& s, const v1::InternalResponse& r) {
               if (!s.ok()) return reactor->Finish(ToGrpc(s));
               fill(r);
               reactor->Finish(grpc::Status::OK);
             });
  return reactor;
}

// Runs `read` on a read-pool thread once a linearizable read may be served.
template <typename Read>
rpc::UnaryReactor* AfterReadBarrier(NodeContext& node, rpc::CallContext* ctx, Read read) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  node.ReadBarrier(false, [reactor, read](const Status& s) {
    if (!s.ok()) return reactor->Finish(ToGrpc(s));
    reactor->Finish(ToGrpc(read()));
  });
  return reactor;
}

}  // namespace

// --- etcdserverpb.Lease -------------------------------------------------------------------------

rpc::UnaryReactor* EtcdLeaseService::LeaseGrant(rpc::CallContext* ctx,
                                                const pb::LeaseGrantRequest* request,
                                                pb::LeaseGrantResponse* response) {
  if (request->ttl() > kMaxLeaseTtlSeconds) {
    return FinishNow(ctx, ToGrpc(etcd_errors::kLeaseTtlTooLarge));
  }
  // etcd raises short TTLs (and <= 0) to its minimum instead of refusing them.
  const std::int64_t ttl_s = std::max(request->ttl(), SecondsUp(leases_.MinTtlMs()));
  v1::InternalRequest internal;
  internal.mutable_lease_grant()->set_id(request->id());
  internal.mutable_lease_grant()->set_ttl_ms(ttl_s * 1000);
  return WriteThroughLog(node_, ctx, std::move(internal),
                         [this, response, mine = !IsForwarded(ctx)](const v1::InternalResponse& r) {
                           if (mine) leases_.CountGrant();
                           const v1::LeaseGrantResult& g = r.lease_grant();
                           *response->mutable_header() = g.header();
                           response->set_id(g.id());
                           response->set_ttl(SecondsUp(g.ttl_ms()));
                           node_.FillHeader(response->mutable_header());
                         });
}

rpc::UnaryReactor* EtcdLeaseService::LeaseRevoke(rpc::CallContext* ctx,
                                                 const pb::LeaseRevokeRequest* request,
                                                 pb::LeaseRevokeResponse* response) {
  v1::InternalRequest internal;
  *internal.mutable_lease_revoke() = *request;
  // etcd: write permission on every key attached to the lease. Apply checks the keys attached
  // then again (the stamp carries user and auth revision, also to the leader over the peer link).
  Status allowed = node_.auth().Authorize(
      *ctx,
      [this, id = LeaseId(request->id())](const AuthState& a, std::string_view user) -> Status {
        if (!a.enabled) return Status::Ok();
        Result<std::vector<std::string>> keys = node_.store().LeaseKeys(id);
        if (!keys.ok()) return keys.status();
        return CheckKeysPermission(a, user, AuthAccess::kWrite, *keys);
      },
      &internal);
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  return WriteThroughLog(node_, ctx, std::move(internal),
                         [this, response, mine = !IsForwarded(ctx)](const v1::InternalResponse& r) {
                           if (mine) leases_.CountRevoke();
                           *response = r.lease_revoke();
                           node_.FillHeader(response->mutable_header());
                         });
}

rpc::BidiReactor<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>*
EtcdLeaseService::LeaseKeepAlive(rpc::CallContext* ctx) {
  return new KeepAliveStream<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>(
      leases_, node_.config().keepalive_queue_max, client_peers_.Resolve(ctx->peer()),
      [](const pb::LeaseKeepAliveRequest& r) { return r.id(); },
      [this](const KeepAliveOutcome& out) {
        pb::LeaseKeepAliveResponse resp;
        *resp.mutable_header() = out.header;
        node_.FillHeader(resp.mutable_header());
        resp.set_id(out.id.value());
        resp.set_ttl(SecondsUp(out.ttl_ms));
        return resp;
      });
}

rpc::UnaryReactor* EtcdLeaseService::LeaseTimeToLive(rpc::CallContext* ctx,
                                                     const pb::LeaseTimeToLiveRequest* request,
                                                     pb::LeaseTimeToLiveResponse* response) {
  Result<AuthCaller> caller = node_.auth().Caller(*ctx);
  if (!caller.ok()) return FinishNow(ctx, ToGrpc(caller.status()));
  return AfterReadBarrier(node_, ctx, [this, request, response, caller = *caller]() -> Status {
    const LeaseId id(request->id());
    Result<std::optional<LeaseInfo>> info = node_.store().GetLease(id);
    if (!info.ok()) return info.status();
    response->set_id(id.value());
    node_.FillHeader(response->mutable_header());
    if (!info->has_value()) {
      response->set_ttl(-1);  // etcd: unknown lease is TTL -1, not an error
      return Status::Ok();
    }
    const LeaseInfo& lease = **info;
    const std::int64_t remaining_ms =
        std::max<std::int64_t>(0, lease.deadline_cluster_ms - leases_.EstimateNowMs());
    response->set_ttl(remaining_ms / 1000);  // etcd truncates Remaining().Seconds()
    response->set_grantedttl(SecondsUp(lease.ttl_ms));
    if (request->keys()) {
      Result<std::vector<std::string>> keys = node_.store().LeaseKeys(id);
      if (!keys.ok()) return keys.status();
      // etcd: the attached keys are shown only to a caller who may read every one.
      EPOCH_RETURN_IF_ERROR(
          CheckKeysPermission(*caller.state, caller.user, AuthAccess::kRead, *keys));
      for (std::string& k : *keys) response->add_keys(std::move(k));
    }
    return Status::Ok();
  });
}

rpc::UnaryReactor* EtcdLeaseService::LeaseLeases(rpc::CallContext* ctx,
                                                 const pb::LeaseLeasesRequest*,
                                                 pb::LeaseLeasesResponse* response) {
  return AfterReadBarrier(node_, ctx, [this, response]() -> Status {
    Result<std::vector<LeaseInfo>> all = node_.store().Leases();
    if (!all.ok()) return all.status();
    for (const LeaseInfo& l : *all) response->add_leases()->set_id(l.id.value());
    node_.FillHeader(response->mutable_header());
    return Status::Ok();
  });
}

// --- epoch.v1.Lease -----------------------------------------------------------------------------

rpc::UnaryReactor* V1LeaseService::Grant(rpc::CallContext* ctx,
                                         const v1::LeaseGrantRequest* request,
                                         v1::LeaseGrantResponse* response) {
  if (request->ttl_ms() / 1000 > kMaxLeaseTtlSeconds) {
    return FinishNow(ctx, ToGrpc(etcd_errors::kLeaseTtlTooLarge));
  }
  v1::InternalRequest internal;
  internal.mutable_lease_grant()->set_id(request->id());
  internal.mutable_lease_grant()->set_ttl_ms(std::max(request->ttl_ms(), leases_.MinTtlMs()));
  return WriteThroughLog(node_, ctx, std::move(internal),
                         [this, response, mine = !IsForwarded(ctx)](const v1::InternalResponse& r) {
                           if (mine) leases_.CountGrant();
                           const v1::LeaseGrantResult& g = r.lease_grant();
                           *response->mutable_header() = g.header();
                           response->set_id(g.id());
                           response->set_ttl_ms(g.ttl_ms());
                           response->set_deadline_cluster_ms(g.deadline_cluster_ms());
                           node_.FillHeader(response->mutable_header());
                         });
}

rpc::BidiReactor<v1::LeaseKeepAliveRequest, v1::LeaseKeepAliveResponse>* V1LeaseService::KeepAlive(
    rpc::CallContext* ctx) {
  return new KeepAliveStream<v1::LeaseKeepAliveRequest, v1::LeaseKeepAliveResponse>(
      leases_, node_.config().keepalive_queue_max, client_peers_.Resolve(ctx->peer()),
      [](const v1::LeaseKeepAliveRequest& r) { return r.id(); },
      [this](const KeepAliveOutcome& out) {
        v1::LeaseKeepAliveResponse resp;
        *resp.mutable_header() = out.header;
        node_.FillHeader(resp.mutable_header());
        resp.set_id(out.id.value());
        resp.set_ttl_ms(out.ttl_ms);
        resp.set_deadline_cluster_ms(out.deadline_cluster_ms);
        return resp;
      });
}

rpc::UnaryReactor* V1LeaseService::Renew(rpc::CallContext* ctx,
                                         const v1::LeaseKeepAliveRequest* request,
                                         v1::LeaseKeepAliveResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  leases_.KeepAlive(LeaseId(request->id()), IsForwarded(ctx),
                    [reactor, response](const KeepAliveOutcome& out) {
                      if (!out.status.ok()) return reactor->Finish(ToGrpc(out.status));
                      *response->mutable_header() = out.header;
                      response->set_id(out.id.value());
                      response->set_ttl_ms(out.ttl_ms);
                      response->set_deadline_cluster_ms(out.deadline_cluster_ms);
                      reactor->Finish(grpc::Status::OK);
                    });
  return reactor;
}

rpc::UnaryReactor* V1LeaseService::Status(rpc::CallContext* ctx,
                                          const v1::LeaseStatusRequest* request,
                                          v1::LeaseStatusResponse* response) {
  Result<AuthCaller> caller = node_.auth().Caller(*ctx);
  if (!caller.ok()) return FinishNow(ctx, ToGrpc(caller.status()));
  return AfterReadBarrier(
      node_, ctx, [this, request, response, caller = *caller]() -> epoch::Status {
        const LeaseId id(request->id());
        Result<std::optional<LeaseInfo>> info = node_.store().GetLease(id);
        if (!info.ok()) return info.status();
        const std::int64_t now_ms = leases_.EstimateNowMs();
        response->set_id(id.value());
        response->set_now_cluster_ms(now_ms);
        node_.FillHeader(response->mutable_header());
        if (!info->has_value()) return epoch::Status::Ok();
        const LeaseInfo& lease = **info;
        response->set_found(true);
        response->set_granted_ttl_ms(lease.ttl_ms);
        response->set_deadline_cluster_ms(lease.deadline_cluster_ms);
        response->set_remaining_ttl_ms(
            std::max<std::int64_t>(0, lease.deadline_cluster_ms - now_ms));
        response->set_max_extension_ms(leases_.MaxExtensionMs(lease.ttl_ms));
        if (!request->keys()) return epoch::Status::Ok();
        Result<std::vector<std::string>> keys = node_.store().LeaseKeys(id);
        if (!keys.ok()) return keys.status();
        EPOCH_RETURN_IF_ERROR(
            CheckKeysPermission(*caller.state, caller.user, AuthAccess::kRead, *keys));
        for (const std::string& key : *keys) {
          pb::RangeRequest range;
          range.set_key(key);
          Result<pb::RangeResponse> kv = node_.store().Range(range);
          if (!kv.ok()) return kv.status();
          v1::LeaseKey* out = response->add_keys();
          out->set_key(key);
          if (kv->kvs_size() > 0) out->set_fencing_token(kv->kvs(0).create_revision());
        }
        return epoch::Status::Ok();
      });
}

rpc::UnaryReactor* V1LeaseService::ClockStatus(rpc::CallContext* ctx, const v1::ClockStatusRequest*,
                                               v1::ClockStatusResponse* response) {
  LeaseStats stats = leases_.Stats();
  response->set_now_cluster_ms(stats.cluster_time_ms);
  response->set_leader_clock_running(stats.clock_running);
  response->set_max_failover_extension_ms(leases_.MaxFailoverExtensionMs());
  response->set_clock_tick_interval_ms(leases_.timing().clock_tick_interval.count());
  response->set_last_start_stall_ms(stats.last_start_stall_ms);
  response->set_min_ttl_ms(leases_.MinTtlMs());
  node_.FillHeader(response->mutable_header());
  return FinishNow(ctx, grpc::Status::OK);
}

void EtcdLeaseService::Register(rpc::Server& server) {
  using Async = etcdserverpb::Lease::AsyncService;
  server.Unary(this, &Async::RequestLeaseGrant,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return LeaseGrant(c, q, r); },
               {.pending = 4});
  server.Unary(this, &Async::RequestLeaseRevoke,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return LeaseRevoke(c, q, r); },
               {.pending = 4});
  server.Bidi(this, &Async::RequestLeaseKeepAlive,
              [this](rpc::CallContext* c) { return LeaseKeepAlive(c); });
  server.Unary(
      this, &Async::RequestLeaseTimeToLive,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return LeaseTimeToLive(c, q, r); },
      {.pending = 2});
  server.Unary(this, &Async::RequestLeaseLeases,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return LeaseLeases(c, q, r); },
               {.pending = 2});
}

void V1LeaseService::Register(rpc::Server& server) {
  using Async = v1::Lease::AsyncService;
  server.Unary(this, &Async::RequestGrant,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Grant(c, q, r); },
               {.pending = 4});
  server.Bidi(this, &Async::RequestKeepAlive, [this](rpc::CallContext* c) { return KeepAlive(c); });
  server.Unary(this, &Async::RequestRenew,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Renew(c, q, r); },
               {.pending = 8});
  server.Unary(this, &Async::RequestStatus,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Status(c, q, r); },
               {.pending = 2});
  server.Unary(this, &Async::RequestClockStatus,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return ClockStatus(c, q, r); },
               {.pending = 2});
}

}  // namespace epoch::server
