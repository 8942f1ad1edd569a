// KvService: etcdserverpb.KV over gRPC's callback API — a thin adapter over NodeContext.
// Range and read-only Txn go through the read barrier (lease or ReadIndex, or none when
// serializable) and then read the store on a read-pool thread; Put, DeleteRange, Txn and Compact
// are validated here (bad input never reaches the log) and then written through the log.
#pragma once

#include "epoch/server/node_context.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class KvService final : public etcdserverpb::KV::CallbackService {
 public:
  explicit KvService(NodeContext& node) : node_(node) {}

  grpc::ServerUnaryReactor* Range(grpc::CallbackServerContext* ctx,
                                  const etcdserverpb::RangeRequest* request,
                                  etcdserverpb::RangeResponse* response) override;
  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* ctx,
                                const etcdserverpb::PutRequest* request,
                                etcdserverpb::PutResponse* response) override;
  grpc::ServerUnaryReactor* DeleteRange(grpc::CallbackServerContext* ctx,
                                        const etcdserverpb::DeleteRangeRequest* request,
                                        etcdserverpb::DeleteRangeResponse* response) override;
  grpc::ServerUnaryReactor* Txn(grpc::CallbackServerContext* ctx,
                                const etcdserverpb::TxnRequest* request,
                                etcdserverpb::TxnResponse* response) override;
  grpc::ServerUnaryReactor* Compact(grpc::CallbackServerContext* ctx,
                                    const etcdserverpb::CompactionRequest* request,
                                    etcdserverpb::CompactionResponse* response) override;

 private:
  // Validates, proposes (or forwards) `request`, and finishes `reactor` with `extract` applied to
  // the response computed at apply time.
  template <typename Response, typename Extract>
  grpc::ServerUnaryReactor* WriteThroughLog(grpc::CallbackServerContext* ctx,
                                            v1::InternalRequest request, Response* response,
                                            Extract extract);

  NodeContext& node_;
};

}  // namespace epoch::server
