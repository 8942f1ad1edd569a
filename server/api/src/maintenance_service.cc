#include "epoch/api/maintenance_service.h"

#include <asio.hpp>
#include <string_view>

#include "epoch/etcd_errors.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/alarms.h"
#include "epoch/state/member_table.h"
#include "snapshot_service.h"

namespace epoch::server {

rpc::UnaryReactor* MaintenanceService::Status(rpc::CallContext* ctx,
                                              const etcdserverpb::StatusRequest*,
                                              etcdserverpb::StatusResponse* response) {
  DriverStatus s = node_.driver().status();
  response->set_version(kEtcdApiVersion);
  response->set_dbsize(node_.store().ApproximateSizeBytes());
  response->set_dbsizeinuse(node_.store().ApproximateSizeBytes());
  response->set_leader(s.leader.value());
  response->set_raftindex(s.last_index.value());
  response->set_raftterm(s.term.value());
  response->set_raftappliedindex(s.applied.value());
  response->set_islearner(false);
  if (s.leader == raft::kNoNode) response->add_errors(std::string(etcd_errors::kNoLeader.message));
  for (const StoreAlarm& alarm : node_.store().Alarms()) response->add_errors(AlarmText(alarm));
  node_.FillHeader(response->mutable_header());
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

rpc::UnaryReactor* MaintenanceService::Alarm(rpc::CallContext* ctx,
                                             const etcdserverpb::AlarmRequest* request,
                                             etcdserverpb::AlarmResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  if (request->action() == etcdserverpb::AlarmRequest::GET) {
    // A linearizable read of the replicated alarms (etcd sends GET through its log).
    node_.ReadBarrier(false, [this, reactor, request, response](const epoch::Status& s) {
      if (!s.ok()) return reactor->Finish(ToGrpc(s));
      ListAlarms(node_.store().Alarms(), request->alarm(), response);
      node_.FillHeader(response->mutable_header());
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }
  epoch::Status valid = ValidateAlarmChange(*request);
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  v1::InternalRequest internal;
  // Raising or clearing an alarm stops or restarts every write: root only while auth is on.
  valid = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  *internal.mutable_alarm() = *request;
  node_.Write(std::move(internal), ctx->deadline(),
              [this, reactor, response](const epoch::Status& s, const v1::InternalResponse& r) {
                if (!s.ok()) return reactor->Finish(ToGrpc(s));
                *response = r.alarm();
                node_.FillHeader(response->mutable_header());
                reactor->Finish(grpc::Status::OK);
              });
  return reactor;
}

rpc::UnaryReactor* MaintenanceService::Defragment(rpc::CallContext* ctx,
                                                  const etcdserverpb::DefragmentRequest*,
                                                  etcdserverpb::DefragmentResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  // Seconds of compaction: on a thread of its own, never a gRPC or read thread.
  asio::post(maintenance_, [this, reactor, response] {
    epoch::Status s = node_.store().Defragment();
    if (!s.ok()) return reactor->Finish(ToGrpc(s));
    node_.FillHeader(response->mutable_header());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

rpc::UnaryReactor* MaintenanceService::HashKV(rpc::CallContext* ctx,
                                              const etcdserverpb::HashKVRequest* request,
                                              etcdserverpb::HashKVResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  // Hashing reads the whole store: on the read pool, not on the thread that serves every call.
  asio::post(node_.read_pool(), [this, reactor, request, response] {
    Result<KvHash> hash = node_.store().HashKV(Revision(request->revision()));
    if (!hash.ok()) return reactor->Finish(ToGrpc(hash.status()));
    response->set_hash(hash->hash);
    response->set_compact_revision(hash->compact_revision.value());
    node_.FillHeader(response->mutable_header());
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

rpc::UnaryReactor* MaintenanceService::MoveLeader(rpc::CallContext* ctx,
                                                  const etcdserverpb::MoveLeaderRequest* request,
                                                  etcdserverpb::MoveLeaderResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  NodeId target(request->targetid());
  if (node_.driver().status().role != raft::Role::kLeader) {
    reactor->Finish(ToGrpc(etcd_errors::kNotLeader));
    return reactor;
  }
  const MemberTablePtr table = node_.store().MemberTable();
  const v1::ClusterMember* member = FindTableMember(*table, request->targetid());
  if (member == nullptr || member->removed() || member->is_learner()) {
    reactor->Finish(ToGrpc(etcd_errors::kBadLeaderTransferee));
    return reactor;
  }
  // Like etcd, answer once the target leads (or fail after the deadline / a few election floors).
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  node_.driver().TransferLeadership(
      target, [this, reactor, response, target, give_up](const epoch::Status& s) {
        if (!s.ok()) return reactor->Finish(ToGrpc(s));
        // The poll function holds itself only weakly; a pending timer wait holds it strongly.
        // So it is freed after its last run returns — never while it runs (assigning to *poll
        // from inside the running function destroyed its own captures: a use-after-free that
        // crashed the old leader right after every successful transfer).
        auto poll = std::make_shared<std::function<void()>>();
        auto timer = std::make_shared<asio::steady_timer>(node_.read_pool());
        std::weak_ptr<std::function<void()>> weak_poll = poll;
        *poll = [this, reactor, response, target, give_up, weak_poll, timer] {
          if (node_.driver().status().leader == target) {
            node_.FillHeader(response->mutable_header());
            return reactor->Finish(grpc::Status::OK);
          }
          if (std::chrono::steady_clock::now() > give_up) {
            return reactor->Finish(ToGrpc(etcd_errors::kTimeout));
          }
          timer->expires_after(std::chrono::milliseconds(5));
          timer->async_wait([next = weak_poll.lock()](std::error_code) { (*next)(); });
        };
        (*poll)();
      });
  return reactor;
}

namespace {

// A snapshot stream refused before it starts (the caller is not root).
class RefusedStream final : public rpc::WriteReactor<etcdserverpb::SnapshotResponse> {
 public:
  explicit RefusedStream(const epoch::Status& why) { Finish(ToGrpc(why)); }
  void OnDone() override { delete this; }
};

}  // namespace

rpc::WriteReactor<etcdserverpb::SnapshotResponse>* MaintenanceService::Snapshot(
    rpc::CallContext* ctx, const etcdserverpb::SnapshotRequest*) {
  // The whole database: root only while auth is on, as etcd's.
  epoch::Status allowed = node_.auth().AuthorizeAdmin(*ctx);
  if (!allowed.ok()) return new RefusedStream(allowed);
  return StartSnapshotStream(node_, snapshots_, ctx, snapshot_message_bytes_);
}

void MaintenanceService::Register(rpc::Server& server) {
  using Async = etcdserverpb::Maintenance::AsyncService;
  // Root only while auth is on (etcd's authMaintenanceServer); Status is open to everyone.
  auto admin = [this](auto handler) {
    return [this, handler](rpc::CallContext* c, const auto* q, auto* r) -> rpc::UnaryReactor* {
      epoch::Status allowed = node_.auth().AuthorizeAdmin(*c);
      if (allowed.ok()) return handler(c, q, r);
      rpc::UnaryReactor* reactor = c->DefaultReactor();
      reactor->Finish(ToGrpc(allowed));
      return reactor;
    };
  };
  server.Unary(this, &Async::RequestAlarm,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Alarm(c, q, r); },
               {.pending = 2});
  server.Unary(this, &Async::RequestStatus,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Status(c, q, r); },
               {.pending = 4});
  server.Unary(
      this, &Async::RequestDefragment,
      admin([this](rpc::CallContext* c, const auto* q, auto* r) { return Defragment(c, q, r); }),
      {.pending = 2});
  server.Unary(this, &Async::RequestHash, admin([](rpc::CallContext* c, const auto*, auto*) {
                 rpc::UnaryReactor* reactor = c->DefaultReactor();
                 reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                              "Hash is not implemented; use HashKV"));
                 return reactor;
               }));
  server.Unary(
      this, &Async::RequestHashKV,
      admin([this](rpc::CallContext* c, const auto* q, auto* r) { return HashKV(c, q, r); }),
      {.pending = 2});
  server.ServerStream(this, &Async::RequestSnapshot,
                      [this](rpc::CallContext* c, const auto* q) { return Snapshot(c, q); });
  server.Unary(
      this, &Async::RequestMoveLeader,
      admin([this](rpc::CallContext* c, const auto* q, auto* r) { return MoveLeader(c, q, r); }),
      {.pending = 2});
}

}  // namespace epoch::server
