#include "epoch/api/kv_service.h"

#include <fmt/format.h>

#include "epoch/etcd_errors.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "epoch/state/kv_validation.h"
#include "kv_write.h"

namespace epoch::server {

template <typename Response, typename Extract>
rpc::UnaryReactor* KvService::WriteThroughLog(rpc::CallContext* ctx, v1::InternalRequest request,
                                              Response* response, Extract extract) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  WriteKv(node_, *ctx, &throttle_, std::move(request),
          [this, reactor, response, extract](const Status& s, const v1::InternalResponse& r) {
            if (!s.ok()) return reactor->Finish(ToGrpc(s));
            *response = extract(r);
            node_.FillHeader(response->mutable_header());
            reactor->Finish(grpc::Status::OK);
          });
  return reactor;
}

grpc::Status KvService::CheckResponseBytes(const google::protobuf::Message& response) {
  const std::size_t bytes = response.ByteSizeLong();
  const std::size_t max = node_.config().max_response_bytes;
  if (bytes <= max) return grpc::Status::OK;
  responses_refused_.fetch_add(1, std::memory_order_relaxed);
  // gRPC's own refusal of an oversized message is RESOURCE_EXHAUSTED too ("trying to send
  // message larger than max"); this one names the flag.
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      fmt::format("epoch: the response of {} bytes is larger than "
                                  "--max-response-bytes ({}); narrow the range or set a limit",
                                  bytes, max));
}

void KvService::RenderMetrics(MetricsText& m) const {
  m.Counter("epoch_kv_responses_too_large_total",
            "Range and read-only Txn answers refused for exceeding --max-response-bytes.",
            responses_refused_.load(std::memory_order_relaxed));
}

rpc::UnaryReactor* KvService::Range(rpc::CallContext* ctx,
                                    const etcdserverpb::RangeRequest* request,
                                    etcdserverpb::RangeResponse* response) {
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  Status valid = ValidateRange(*request);
  if (valid.ok()) {
    valid = node_.auth().Authorize(*ctx, [request](const AuthState& a, std::string_view user) {
      return CheckRangePermission(a, user, *request);
    });
  }
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  // One key (no range_end) is a bounded amount of work: it may be served on this gRPC thread.
  const bool one_key = request->range_end().empty();
  node_.ReadBarrier(
      request->serializable(),
      [this, reactor, request, response](const Status& s) {
        if (!s.ok()) return reactor->Finish(ToGrpc(s));
        Result<etcdserverpb::RangeResponse> result = node_.store().Range(*request);
        if (!result.ok()) return reactor->Finish(ToGrpc(result.status()));
        if (grpc::Status too_large = CheckResponseBytes(*result); !too_large.ok()) {
          return reactor->Finish(too_large);
        }
        *response = std::move(*result);
        node_.FillHeader(response->mutable_header());
        reactor->Finish(grpc::Status::OK);
      },
      one_key);
  return reactor;
}

rpc::UnaryReactor* KvService::Put(rpc::CallContext* ctx, const etcdserverpb::PutRequest* request,
                                  etcdserverpb::PutResponse* response) {
  v1::InternalRequest internal;
  Status valid = PreparePut(node_, *ctx, *request, &internal);
  if (!valid.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  return WriteThroughLog(ctx, std::move(internal), response,
                         [](const v1::InternalResponse& r) { return r.put(); });
}

rpc::UnaryReactor* KvService::DeleteRange(rpc::CallContext* ctx,
                                          const etcdserverpb::DeleteRangeRequest* request,
                                          etcdserverpb::DeleteRangeResponse* response) {
  v1::InternalRequest internal;
  Status valid = PrepareDeleteRange(node_, *ctx, *request, &internal);
  if (!valid.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  return WriteThroughLog(ctx, std::move(internal), response,
                         [](const v1::InternalResponse& r) { return r.delete_range(); });
}

rpc::UnaryReactor* KvService::Txn(rpc::CallContext* ctx, const etcdserverpb::TxnRequest* request,
                                  etcdserverpb::TxnResponse* response) {
  v1::InternalRequest internal;
  Status valid = PrepareTxn(node_, *ctx, *request, &internal);
  if (!valid.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  if (IsReadOnlyTxn(*request)) {
    // No writes: a linearizable read, without a log entry (as etcd does).
    rpc::UnaryReactor* reactor = ctx->DefaultReactor();
    node_.ReadBarrier(false, [this, reactor, request, response](const Status& s) {
      if (!s.ok()) return reactor->Finish(ToGrpc(s));
      Result<etcdserverpb::TxnResponse> result = node_.store().ReadOnlyTxn(*request);
      if (!result.ok()) return reactor->Finish(ToGrpc(result.status()));
      if (grpc::Status too_large = CheckResponseBytes(*result); !too_large.ok()) {
        return reactor->Finish(too_large);
      }
      *response = std::move(*result);
      node_.FillHeader(response->mutable_header());
      reactor->Finish(grpc::Status::OK);
    });
    return reactor;
  }
  return WriteThroughLog(ctx, std::move(internal), response,
                         [](const v1::InternalResponse& r) { return r.txn(); });
}

rpc::UnaryReactor* KvService::Compact(rpc::CallContext* ctx,
                                      const etcdserverpb::CompactionRequest* request,
                                      etcdserverpb::CompactionResponse* response) {
  v1::InternalRequest internal;
  // Root only: a compaction removes every user's history.
  Status allowed = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (!allowed.ok()) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpc(allowed));
    return reactor;
  }
  *internal.mutable_compaction() = *request;
  if (!request->physical()) {
    return WriteThroughLog(ctx, std::move(internal), response,
                           [](const v1::InternalResponse& r) { return r.compaction(); });
  }
  // physical=true answers once this member's store has removed the compacted records (etcd
  // waits for its background compaction the same way); the apply itself only records the
  // compact revision (server/state/src/compaction.h).
  rpc::UnaryReactor* reactor = ctx->DefaultReactor();
  const Revision revision(request->revision());
  WriteKv(node_, *ctx, &throttle_, std::move(internal),
          [this, reactor, response, revision](const Status& s, const v1::InternalResponse& r) {
            if (!s.ok()) return reactor->Finish(ToGrpc(s));
            *response = r.compaction();
            node_.FillHeader(response->mutable_header());
            node_.store().WhenCompacted(revision, [reactor](const Status& done) {
              reactor->Finish(done.ok() ? grpc::Status::OK : ToGrpc(done));
            });
          });
  return reactor;
}

void KvService::Register(rpc::Server& server) {
  using Async = etcdserverpb::KV::AsyncService;
  server.Unary(this, &Async::RequestRange,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Range(c, q, r); },
               {.pending = 32});
  server.Unary(this, &Async::RequestPut,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Put(c, q, r); },
               {.pending = 32});
  server.Unary(this, &Async::RequestDeleteRange,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return DeleteRange(c, q, r); },
               {.pending = 8});
  server.Unary(this, &Async::RequestTxn,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Txn(c, q, r); },
               {.pending = 32});
  server.Unary(this, &Async::RequestCompact,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return Compact(c, q, r); },
               {.pending = 2});
}

}  // namespace epoch::server
