// ElectionService: v3electionpb.Election, etcd's server-side election
// (etcdserver/api/v3election/election.go), i.e. the clientv3 concurrency Election recipe run inside
// the server on the caller's lease. The leader of election `name` is the key under `name + "/"`
// with the smallest create_revision.
//
//   Campaign{name, lease, value}: own key K = name + "/" + hex(lease).
//     Txn{ CREATE(K) == 0 ? Put(K, value, lease) : Range(K) }; rev = the txn's revision or K's
//     create_revision; if K existed with another value, Proclaim(value). Then wait until every
//     key under the prefix created before K is deleted (PredecessorWait, as Lock does). Answer
//     {header of the campaign txn, leader = {name, K, rev, lease}}; rev is the fencing token, also
//     sent as trailing metadata `epoch-fencing-token`. A cancelled Campaign resigns.
//   Proclaim{leader, value}: Txn{ CREATE(leader.key) == leader.rev ? Put(key, value, lease) };
//     not leader → "election: not leader".
//   Resign{leader}: Txn{ CREATE(leader.key) == leader.rev ? DeleteRange(key) } (no error if not
//     leader any more).
//   Leader{name}: linearizable first-create Range; none → "election: no leader".
//   Observe{name}: a server stream of LeaderResponse, as clientv3's Election.Observe: the current
//     leader (if any), then every Put of the leader's key (Proclaim), and when the leader's key is
//     deleted, the next leader read from the store (none: the first key put under the prefix).
//     Driven by applied events (RecipeEventFeed), never polling. A client that stops reading has
//     at most kObserveQueueMax responses queued, then the stream ends with RESOURCE_EXHAUSTED.
//
// Errors: Proclaim/Resign without `leader` fail with etcd's `"leader" field must be provided`;
// etcd's recipe errors are plain Go errors, i.e. gRPC code UNKNOWN with the same text. Lease rules
// as LockService (unknown lease: etcd_errors::kLeaseNotFound; lease 0: a 60 s lease).
//
// Threading: async_rpc.h reactors; no handler thread is held while waiting or observing.
#pragma once

#include "epoch/api/recipe_wait.h"
#include "epoch/etcd_errors.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "v3electionpb/v3election.grpc.pb.h"

namespace epoch::server {

inline constexpr std::size_t kObserveQueueMax = 1024;

class ElectionService final : public v3electionpb::Election::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  ElectionService(NodeContext& node, RecipeEventFeed& feed) : node_(node), feed_(feed) {}

  rpc::UnaryReactor* Campaign(rpc::CallContext* ctx, const v3electionpb::CampaignRequest* request,
                              v3electionpb::CampaignResponse* response);
  rpc::UnaryReactor* Proclaim(rpc::CallContext* ctx, const v3electionpb::ProclaimRequest* request,
                              v3electionpb::ProclaimResponse* response);
  rpc::UnaryReactor* Leader(rpc::CallContext* ctx, const v3electionpb::LeaderRequest* request,
                            v3electionpb::LeaderResponse* response);
  rpc::WriteReactor<v3electionpb::LeaderResponse>* Observe(
      rpc::CallContext* ctx, const v3electionpb::LeaderRequest* request);
  rpc::UnaryReactor* Resign(rpc::CallContext* ctx, const v3electionpb::ResignRequest* request,
                            v3electionpb::ResignResponse* response);

 private:
  NodeContext& node_;
  RecipeEventFeed& feed_;
};

}  // namespace epoch::server
