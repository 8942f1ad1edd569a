#include "epoch/api/idempotent_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/kv_validation.h"
#include "kv_write.h"

namespace epoch::server {
namespace {

using Outcome = IdempotentService::Outcome;

constexpr std::string_view kOutcomeNames[] = {"applied", "replayed", "expired", "refused",
                                              "failed"};

// How a finished call counts in /metrics.
Outcome OutcomeOf(const Status& s, bool replayed) {
  if (s.ok()) return replayed ? Outcome::kReplayed : Outcome::kApplied;
  if (s.Is(ErrorId::kIdempotencyExpired)) return Outcome::kExpired;
  if (s.Is(ErrorId::kIdempotencyTableFull)) return Outcome::kRefused;
  return Outcome::kFailed;
}

}  // namespace

Status IdempotentService::StampKey(const v1::IdempotencyKey& key,
                                   v1::InternalRequest* internal) const {
  const bool session = !key.client_id().empty() || key.sequence() != 0;
  if (session == !key.key().empty()) {
    return Status::InvalidArgument(
        "epoch: an idempotency key is either client_id + sequence or key, exactly one of them");
  }
  if (session && (key.client_id().empty() || key.sequence() == 0)) {
    return Status::InvalidArgument(
        "epoch: an idempotency session key needs a client_id and a "
        "sequence >= 1");
  }
  if (key.client_id().size() > kIdempotencyClientIdMax) {
    return Status::InvalidArgument(
        fmt::format("epoch: idempotency client_id longer than {} bytes", kIdempotencyClientIdMax));
  }
  if (key.key().size() > kIdempotencyKeyMax) {
    return Status::InvalidArgument(
        fmt::format("epoch: idempotency key longer than {} bytes", kIdempotencyKeyMax));
  }
  if (key.ttl_ms() < 0) return Status::InvalidArgument("epoch: negative idempotency ttl_ms");
  const NodeConfig::IdempotencyLimits& limits = node_.config().idempotency;
  const std::int64_t ttl_ms = key.ttl_ms() > 0 ? key.ttl_ms() : limits.default_ttl.count();
  internal->set_idempotency_ttl_ms(std::min<std::int64_t>(ttl_ms, limits.max_ttl.count()));
  if (session) {
    internal->set_idempotency_client_id(key.client_id());
    internal->set_idempotency_sequence(key.sequence());
  } else {
    internal->set_idempotency_key(key.key());
  }
  internal->set_idempotency_records_max(limits.records_max);
  internal->set_idempotency_bytes_max(limits.bytes_max);
  return Status::Ok();
}

template <typename Response, typename Extract>
rpc::UnaryReactor* IdempotentService::Write(rpc::CallContext* ctx, const Status& prepared,
                                            v1::InternalRequest internal, Response* response,
                                            Extract extract) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  if (!prepared.ok()) {
    Count(Outcome::kRefused);
    reactor->Finish(ToGrpc(prepared));
    return reactor;
  }
  WriteKv(node_, *ctx, &throttle_, std::move(internal),
          [this, reactor, response, extract](const Status& s, const v1::InternalResponse& r) {
            Count(OutcomeOf(s, r.replayed()));
            if (!s.ok()) return reactor->Finish(ToGrpc(s));
            *response->mutable_response() = extract(r);
            response->set_replayed(r.replayed());
            node_.FillHeader(response->mutable_response()->mutable_header());
            reactor->Finish(grpc::Status::OK);
          });
  return reactor;
}

rpc::UnaryReactor* IdempotentService::Put(rpc::CallContext* ctx,
                                          const v1::IdempotentPutRequest* request,
                                          v1::IdempotentPutResponse* response) {
  v1::InternalRequest internal;
  Status prepared = StampKey(request->idempotency(), &internal);
  if (prepared.ok()) prepared = PreparePut(node_, *ctx, request->request(), &internal);
  return Write(ctx, prepared, std::move(internal), response,
               [](const v1::InternalResponse& r) { return r.put(); });
}

rpc::UnaryReactor* IdempotentService::DeleteRange(rpc::CallContext* ctx,
                                                  const v1::IdempotentDeleteRangeRequest* request,
                                                  v1::IdempotentDeleteRangeResponse* response) {
  v1::InternalRequest internal;
  Status prepared = StampKey(request->idempotency(), &internal);
  if (prepared.ok()) prepared = PrepareDeleteRange(node_, *ctx, request->request(), &internal);
  return Write(ctx, prepared, std::move(internal), response,
               [](const v1::InternalResponse& r) { return r.delete_range(); });
}

rpc::UnaryReactor* IdempotentService::Txn(rpc::CallContext* ctx,
                                          const v1::IdempotentTxnRequest* request,
                                          v1::IdempotentTxnResponse* response) {
  v1::InternalRequest internal;
  Status prepared = StampKey(request->idempotency(), &internal);
  if (prepared.ok()) prepared = PrepareTxn(node_, *ctx, request->request(), &internal);
  // Nothing to apply once: KV.Txn serves it as a linearizable read, which any client may retry.
  if (prepared.ok() && IsReadOnlyTxn(request->request())) {
    prepared = Status::InvalidArgument(
        "epoch: a read-only txn takes no idempotency key; send it to etcdserverpb.KV/Txn");
  }
  return Write(ctx, prepared, std::move(internal), response,
               [](const v1::InternalResponse& r) { return r.txn(); });
}

void IdempotentService::RenderMetrics(MetricsText& m) const {
  std::vector<std::pair<std::string_view, std::uint64_t>> values;
  for (std::size_t i = 0; i < outcomes_.size(); ++i) {
    values.emplace_back(kOutcomeNames[i], outcomes_[i].load(std::memory_order_relaxed));
  }
  m.LabeledCounter("epoch_idempotent_requests_total",
                   "epoch.v1.Idempotent calls by outcome: applied (first answer), replayed (the "
                   "remembered answer), expired (a session key past its window, not applied), "
                   "refused (malformed key, read-only txn, or the table full), failed (any "
                   "other error).",
                   "outcome", values);
}

void IdempotentService::Register(rpc::Server& server) {
  using Async = v1::Idempotent::AsyncService;
  server.Unary(this, &Async::RequestPut,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Put(c, q, r); },
               {.pending = 8});
  server.Unary(this, &Async::RequestDeleteRange,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return DeleteRange(c, q, r); },
               {.pending = 4});
  server.Unary(this, &Async::RequestTxn,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Txn(c, q, r); },
               {.pending = 8});
}

}  // namespace epoch::server
