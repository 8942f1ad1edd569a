#include "epoch/api/settings_service.h"

#include "epoch/node/cluster_timing_keeper.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/cluster_timing.h"

namespace epoch::server {

void SettingsService::FillTiming(v1::TimingResponse* response) const {
  if (ClusterTimingPtr recorded = node_.store().ClusterTiming()) {
    *response->mutable_cluster() = recorded->current();
    response->set_recorded_index(recorded->index());
  }
  const DriverStatus s = node_.driver().status();
  const std::int64_t tick = node_.config().tick.count();
  v1::TimingSettings* member = response->mutable_member();
  member->set_tick_ms(tick);
  member->set_heartbeat_ms(s.timing.heartbeat_ticks * tick);
  member->set_election_timeout_ms(s.timing.election_timeout_min_ticks * tick);
  member->set_max_clock_drift(s.timing.max_clock_drift);
  if (s.role != raft::Role::kLeader) return;
  for (const auto& [id, floor] : s.voter_floors) {
    v1::MemberTiming* voter = response->add_voters();
    voter->set_id(id.value());
    voter->set_election_timeout_ms(floor * tick);
  }
}

rpc::UnaryReactor* SettingsService::Timing(rpc::CallContext* ctx, const v1::TimingRequest*,
                                           v1::TimingResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  epoch::Status allowed = node_.auth().AuthorizeAdmin(*ctx);
  if (!allowed.ok()) {
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  FillTiming(response);
  node_.FillHeader(response->mutable_header());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

rpc::UnaryReactor* SettingsService::SetTiming(rpc::CallContext* ctx,
                                              const v1::SetTimingRequest* request,
                                              v1::TimingResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  v1::InternalRequest internal;
  epoch::Status allowed = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (!allowed.ok()) {
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  ClusterTimingPtr recorded = node_.store().ClusterTiming();
  if (recorded == nullptr) {
    reactor->Finish(ToGrpc(epoch::Status::FailedPrecondition(
        "the cluster has not recorded its timing yet (it does once it first has a leader)")));
    return reactor;
  }
  v1::TimingSettings next = recorded->current();
  if (request->has_heartbeat_ms()) next.set_heartbeat_ms(request->heartbeat_ms());
  if (request->has_election_timeout_ms()) {
    next.set_election_timeout_ms(request->election_timeout_ms());
  }
  if (request->has_max_clock_drift()) next.set_max_clock_drift(request->max_clock_drift());
  epoch::Status valid = CheckTimingFor(node_.config(), next, recorded.get());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  *internal.mutable_cluster_timing()->mutable_timing() = next;
  node_.Write(std::move(internal), ctx->deadline(),
              [this, reactor, response](const epoch::Status& s, const v1::InternalResponse& r) {
                if (!s.ok()) return reactor->Finish(ToGrpc(s));
                FillTiming(response);
                // The record as applied (a forwarded write may not have reached this member's
                // store yet).
                *response->mutable_cluster() = r.cluster_timing().timing().current();
                response->set_recorded_index(r.cluster_timing().timing().index());
                node_.FillHeader(response->mutable_header());
                reactor->Finish(grpc::Status::OK);
              });
  return reactor;
}

void SettingsService::Register(rpc::Server& server) {
  using Async = v1::Settings::AsyncService;
  server.Unary(this, &Async::RequestTiming,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Timing(c, q, r); },
               {.pending = 1});
  server.Unary(this, &Async::RequestSetTiming,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return SetTiming(c, q, r); },
               {.pending = 1});
}

}  // namespace epoch::server
