// ObserveStream: one v3electionpb.Election/Observe call (election_service.h has the contract).
//
// How it follows the leader without missing a change: it subscribes to the election prefix on
// the RecipeEventFeed *before* reading the current leader (linearizable first-create Range at
// revision R); events at or below R are then skipped, later ones are processed in revision order:
//   - no leader known: the first PUT under the prefix is the new leader (clientv3's rule);
//   - leader key K known: a PUT of K is sent (a Proclaim); a DELETE of K re-reads the first-create
//     key from the store (at its revision R', later events at or below R' skipped);
//   - a resync (snapshot installed) re-reads the leader as a DELETE would.
// A response is sent only when it differs from the last one sent (key + mod_revision), so a
// re-read that finds the same leader is not repeated.
//
// Threading: feed events arrive on the driver strand and are queued; processing runs on the read
// pool, one batch at a time; gRPC reactions on gRPC threads. One mutex guards all state; it is
// never held while calling gRPC (StartWrite/Finish) or the feed.
#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "epoch/api/recipe_wait.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "v3electionpb/v3election.pb.h"

namespace epoch::server {

class ObserveStream final : public rpc::WriteReactor<v3electionpb::LeaderResponse>,
                            public std::enable_shared_from_this<ObserveStream> {
 public:
  // Creates the stream, subscribes and starts the first read. Owns itself until OnDone.
  static ObserveStream* Start(NodeContext& node, RecipeEventFeed& feed, std::string prefix);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  struct Item {
    Revision revision;
    std::vector<mvccpb::Event> events;
    bool resync = false;
  };

  ObserveStream(NodeContext& node, RecipeEventFeed& feed, std::string prefix);
  void OnEvents(Revision revision, const std::vector<mvccpb::Event>& events, bool resync);
  void OnInitial(const grpc::Status& status, const etcdserverpb::RangeResponse& range);
  void SchedulePendingLocked();
  void ProcessPending();
  // --- processor-owned (one ProcessPending at a time; OnInitial before any) ---
  grpc::Status ProcessItem(const Item& item, std::vector<v3electionpb::LeaderResponse>* outs);
  grpc::Status RereadLeader(std::vector<v3electionpb::LeaderResponse>* outs);
  void Emit(etcdserverpb::ResponseHeader header, const mvccpb::KeyValue& kv,
            std::vector<v3electionpb::LeaderResponse>* outs);
  void Deliver(std::vector<v3electionpb::LeaderResponse> outs);  // mu_ held
  void End(const grpc::Status& status);                          // mu_ not held

  NodeContext& node_;
  RecipeEventFeed& feed_;
  const std::string prefix_;
  std::uint64_t subscription_ = 0;
  std::shared_ptr<ObserveStream> self_;  // from Start until OnDone

  std::mutex mu_;
  // Processor-owned.
  Revision base_;           // events at or below are reflected in the last read
  std::string leader_key_;  // empty: no leader known
  std::string last_sent_;   // key + mod_revision of the last response

  bool initialized_ = false;  // the first read is done; guarded by mu_
  bool processing_ = false;   // a ProcessPending is scheduled or running; guarded by mu_
  std::deque<Item> pending_;  // guarded by mu_
  std::deque<v3electionpb::LeaderResponse> out_;  // front is being written; guarded by mu_
  bool writing_ = false;                          // guarded by mu_
  bool finishing_ = false;                        // guarded by mu_
  grpc::Status final_status_;                     // guarded by mu_
};

}  // namespace epoch::server
