// IdempotentService: epoch.v1.Idempotent — Put, DeleteRange and Txn carrying an idempotency key
// (a client session's id + sequence number, or a free-form key). The write is validated, checked
// against the caller's permissions and written exactly as KvService writes it (src/kv_write.h);
// the key, its TTL (default and cap from the flags) and the table's bounds travel in the log
// entry, and the state machine applies a key at most once (server/state idempotency.h): a repeat
// within the key's window gets the first answer with `replayed = true`, a late repeat of a
// session key gets FAILED_PRECONDITION "epoch: idempotency key expired; outcome unknown", and a
// new key past the table's bounds RESOURCE_EXHAUSTED. A read-only Txn is refused
// (INVALID_ARGUMENT): it changes nothing, so KV.Txn serves it and may be retried freely.
//
// Threading: handlers on the epoch-grpc threads; RenderMetrics on any.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "epoch/api/txn_read_throttle.h"
#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/v1/epoch.grpc.pb.h"

namespace epoch::server {

class IdempotentService final : public v1::Idempotent::AsyncService {
 public:
  // `throttle`: as KvService's (the same one).
  IdempotentService(NodeContext& node, TxnReadThrottle& throttle)
      : node_(node), throttle_(throttle) {}

  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  rpc::UnaryReactor* Put(rpc::CallContext* ctx, const v1::IdempotentPutRequest* request,
                         v1::IdempotentPutResponse* response);
  rpc::UnaryReactor* DeleteRange(rpc::CallContext* ctx,
                                 const v1::IdempotentDeleteRangeRequest* request,
                                 v1::IdempotentDeleteRangeResponse* response);
  rpc::UnaryReactor* Txn(rpc::CallContext* ctx, const v1::IdempotentTxnRequest* request,
                         v1::IdempotentTxnResponse* response);

  // epoch_idempotent_requests_total{outcome="applied|replayed|expired|refused|failed"}.
  void RenderMetrics(MetricsText& m) const;

  enum class Outcome : std::uint8_t { kApplied, kReplayed, kExpired, kRefused, kFailed, kCount };

 private:
  // Stamps the key, its TTL and the table's bounds into `internal`, or refuses a malformed key.
  Status StampKey(const v1::IdempotencyKey& key, v1::InternalRequest* internal) const;

  // Finishes with `prepared` when it is a refusal; else writes `internal` and finishes with
  // `extract` applied to the response computed at apply time.
  template <typename Response, typename Extract>
  rpc::UnaryReactor* Write(rpc::CallContext* ctx, const Status& prepared,
                           v1::InternalRequest internal, Response* response, Extract extract);

  void Count(Outcome outcome) {
    outcomes_[static_cast<std::size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
  }

  NodeContext& node_;
  TxnReadThrottle& throttle_;
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Outcome::kCount)> outcomes_{};
};

}  // namespace epoch::server
