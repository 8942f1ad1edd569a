// SettingsService (epoch.v1.Settings): the cluster-wide timing, `epochctl cluster timing get|set`
// (docs/timing-and-safety.md §12).
//
// Timing answers from this member's applied record and what its Raft core runs; the leader adds
// the election timeout each voter last reported, which shows how far a change has rolled out.
// SetTiming fills the fields it was not given from the record, checks the result against the
// record's rules and this member's Raft rules (CheckTimingFor), and writes an
// InternalRequest.cluster_timing through NodeContext::Write; the answer is the record once it
// applied. Root only while auth is on.
//
// Threading: handlers run on gRPC threads and never block; answers come from the write path.
#pragma once

#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/v1/epoch.grpc.pb.h"

namespace epoch::server {

class SettingsService final : public v1::Settings::AsyncService {
 public:
  explicit SettingsService(NodeContext& node) : node_(node) {}

  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  rpc::UnaryReactor* Timing(rpc::CallContext* ctx, const v1::TimingRequest* request,
                            v1::TimingResponse* response);
  rpc::UnaryReactor* SetTiming(rpc::CallContext* ctx, const v1::SetTimingRequest* request,
                               v1::TimingResponse* response);

 private:
  // Fills everything but the header's answer from this member's current view.
  void FillTiming(v1::TimingResponse* response) const;

  NodeContext& node_;
};

}  // namespace epoch::server
