// KvService: etcdserverpb.KV on gRPC's async API (async_rpc.h) — a thin adapter over NodeContext.
// Range and read-only Txn go through the read barrier (lease or ReadIndex, or none when
// serializable) and then read the store on a read-pool thread; Put, DeleteRange, Txn and Compact
// are validated here (bad input never reaches the log) and then written through the log. A Range
// or read-only Txn answer larger than --max-response-bytes is refused with RESOURCE_EXHAUSTED and
// counted (epoch_kv_responses_too_large_total).
//
// Threading: handlers on the epoch-grpc threads, reads on the read pool; RenderMetrics on any.
#pragma once

#include <atomic>

#include "epoch/api/txn_read_throttle.h"
#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class KvService final : public etcdserverpb::KV::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  // `throttle` (shared with IdempotentService) slows clients whose txns keep reading too much.
  KvService(NodeContext& node, TxnReadThrottle& throttle) : node_(node), throttle_(throttle) {}

  rpc::UnaryReactor* Range(rpc::CallContext* ctx, const etcdserverpb::RangeRequest* request,
                           etcdserverpb::RangeResponse* response);
  rpc::UnaryReactor* Put(rpc::CallContext* ctx, const etcdserverpb::PutRequest* request,
                         etcdserverpb::PutResponse* response);
  rpc::UnaryReactor* DeleteRange(rpc::CallContext* ctx,
                                 const etcdserverpb::DeleteRangeRequest* request,
                                 etcdserverpb::DeleteRangeResponse* response);
  rpc::UnaryReactor* Txn(rpc::CallContext* ctx, const etcdserverpb::TxnRequest* request,
                         etcdserverpb::TxnResponse* response);
  rpc::UnaryReactor* Compact(rpc::CallContext* ctx, const etcdserverpb::CompactionRequest* request,
                             etcdserverpb::CompactionResponse* response);

  // Answers refused for their size, for /metrics.
  void RenderMetrics(MetricsText& m) const;

 private:
  // Writes `request` through the log (src/kv_write.h) and finishes the call with `extract`
  // applied to the response computed at apply time.
  template <typename Response, typename Extract>
  rpc::UnaryReactor* WriteThroughLog(rpc::CallContext* ctx, v1::InternalRequest request,
                                     Response* response, Extract extract);

  // OK, or RESOURCE_EXHAUSTED (counted) when `response` is over --max-response-bytes.
  grpc::Status CheckResponseBytes(const google::protobuf::Message& response);

  NodeContext& node_;
  TxnReadThrottle& throttle_;
  std::atomic<std::uint64_t> responses_refused_{0};
};

}  // namespace epoch::server
