#include "epoch/api/jobs_service.h"

#include <fmt/format.h>

#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "job_acquire.h"
#include "job_layout.h"
#include "job_release.h"
#include "job_status.h"

namespace epoch::server {
namespace {

rpc::UnaryReactor* FinishNow(rpc::CallContext* ctx, const grpc::Status& s) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(s);
  return reactor;
}

// Acquire and Release read and write every key of the job.
Status CheckJobPermission(const AuthState& a, std::string_view user, const jobs::QueueKeys& keys) {
  for (AuthAccess access : {AuthAccess::kRead, AuthAccess::kWrite}) {
    EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, access, keys.LockPrefix()));
    EPOCH_RETURN_IF_ERROR(CheckKeysPermission(
        a, user, access, {keys.Job(), keys.Epoch(), keys.DlqJob(), keys.DoneJob()}));
  }
  return Status::Ok();
}

Status CheckJobReadPermission(const AuthState& a, std::string_view user,
                              const jobs::QueueKeys& keys) {
  EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, AuthAccess::kRead, keys.LockPrefix()));
  return CheckKeysPermission(a, user, AuthAccess::kRead,
                             {keys.Job(), keys.Epoch(), keys.DlqJob(), keys.DoneJob()});
}

}  // namespace

rpc::UnaryReactor* JobsService::Acquire(rpc::CallContext* ctx, const v1::JobAcquireRequest* request,
                                        v1::JobAcquireResponse* response) {
  Result<jobs::QueueKeys> keys = jobs::KeysFor(request->prefix(), request->job());
  if (!keys.ok()) return FinishNow(ctx, ToGrpc(keys.status()));
  if (request->lease() == 0) {
    return FinishNow(
        ctx, ToGrpc(epoch::Status::InvalidArgument("epoch: a job needs the holder's lease")));
  }
  v1::InternalRequest stamp;
  epoch::Status allowed = node_.auth().Authorize(
      *ctx,
      [&](const AuthState& a, std::string_view user) { return CheckJobPermission(a, user, *keys); },
      &stamp);
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  std::shared_ptr<RecipeCall> call = RecipeCall::Create(ctx);
  const std::uint32_t max = request->max_epochs() != 0 ? request->max_epochs() : max_epoch_changes_;
  JobAcquisition::Start(node_, metrics_, call, response,
                        {std::move(*keys),
                         request->lease(),
                         request->holder(),
                         max,
                         {stamp.auth_user(), stamp.auth_revision()}});
  return call->reactor();
}

rpc::UnaryReactor* JobsService::Status(rpc::CallContext* ctx, const v1::JobStatusRequest* request,
                                       v1::JobStatusResponse* response) {
  Result<jobs::QueueKeys> keys = jobs::KeysFor(request->prefix(), request->job());
  if (!keys.ok()) return FinishNow(ctx, ToGrpc(keys.status()));
  epoch::Status allowed =
      node_.auth().Authorize(*ctx, [&](const AuthState& a, std::string_view user) {
        return CheckJobReadPermission(a, user, *keys);
      });
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  node_.ReadBarrier(false,
                    [this, reactor, response, keys = std::move(*keys)](const epoch::Status& s) {
                      if (!s.ok()) return reactor->Finish(ToGrpc(s));
                      epoch::Status read = ReadJobStatus(node_.store(), keys, response);
                      if (read.ok()) node_.FillHeader(response->mutable_header());
                      reactor->Finish(ToGrpc(read));
                    });
  return reactor;
}

rpc::UnaryReactor* JobsService::Release(rpc::CallContext* ctx, const v1::JobReleaseRequest* request,
                                        v1::JobReleaseResponse* response) {
  Result<jobs::QueueKeys> keys = jobs::KeysFor(request->prefix(), request->job());
  if (!keys.ok()) return FinishNow(ctx, ToGrpc(keys.status()));
  if (request->fencing_token() <= 0) {
    return FinishNow(ctx,
                     ToGrpc(epoch::Status::InvalidArgument("epoch: fencing_token must be > 0")));
  }
  v1::InternalRequest stamp;
  epoch::Status allowed = node_.auth().Authorize(
      *ctx,
      [&](const AuthState& a, std::string_view user) { return CheckJobPermission(a, user, *keys); },
      &stamp);
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  JobRelease::Start(node_, metrics_, reactor, ctx->deadline(), response,
                    {std::move(*keys),
                     request->fencing_token(),
                     request->completed(),
                     {stamp.auth_user(), stamp.auth_revision()}});
  return reactor;
}

rpc::UnaryReactor* JobsService::ListDeadLetters(rpc::CallContext* ctx,
                                                const v1::ListDeadLettersRequest* request,
                                                v1::ListDeadLettersResponse* response) {
  if (request->limit() < 0) {
    return FinishNow(ctx, ToGrpc(epoch::Status::InvalidArgument("epoch: limit must be >= 0")));
  }
  const std::string prefix = jobs::QueuePrefix(request->prefix());
  epoch::Status allowed =
      node_.auth().Authorize(*ctx, [&](const AuthState& a, std::string_view user) {
        EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, AuthAccess::kRead, prefix + "dlq/"));
        EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, AuthAccess::kRead, prefix + "epoch/"));
        EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, AuthAccess::kRead, prefix + "jobs/"));
        EPOCH_RETURN_IF_ERROR(CheckPrefixPermission(a, user, AuthAccess::kRead, prefix + "lock/"));
        return CheckPrefixPermission(a, user, AuthAccess::kRead, prefix + "done/");
      });
  if (!allowed.ok()) return FinishNow(ctx, ToGrpc(allowed));
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  node_.ReadBarrier(
      false, [this, reactor, response, prefix, limit = request->limit()](const epoch::Status& s) {
        if (!s.ok()) return reactor->Finish(ToGrpc(s));
        epoch::Status read = ReadDeadLetters(node_.store(), prefix, limit, response);
        if (read.ok()) node_.FillHeader(response->mutable_header());
        reactor->Finish(ToGrpc(read));
      });
  return reactor;
}

void JobsService::RenderMetrics(MetricsText& m) const {
  const auto get = [](const std::atomic<std::uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
  };
  m.Counter("epoch_jobs_acquired_total",
            "Jobs.Acquire calls served here that counted a new holder of a job.",
            get(metrics_.acquired));
  m.Counter("epoch_jobs_epoch_changes_total",
            "Counted acquisitions of a job that had a holder before (changes of hands).",
            get(metrics_.epoch_changes));
  m.Counter("epoch_jobs_dead_lettered_total",
            "Jobs moved to the dead-letter prefix by an acquisition served here.",
            get(metrics_.dead_lettered));
  m.LabeledCounter("epoch_jobs_released_total",
                   "Jobs released through Jobs.Release by their current holder, by completion.",
                   "completed",
                   std::vector<std::pair<std::string_view, std::uint64_t>>{
                       {"false", get(metrics_.released[0])}, {"true", get(metrics_.released[1])}});
}

void JobsService::Register(rpc::Server& server) {
  using Async = v1::Jobs::AsyncService;
  server.Unary(this, &Async::RequestAcquire,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Acquire(c, q, r); },
               {.pending = 4, .notify_cancel = true});
  server.Unary(this, &Async::RequestStatus,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Status(c, q, r); });
  server.Unary(this, &Async::RequestRelease,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Release(c, q, r); },
               {.pending = 4});
  server.Unary(
      this, &Async::RequestListDeadLetters,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return ListDeadLetters(c, q, r); });
}

}  // namespace epoch::server
