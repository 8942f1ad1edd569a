// WatchService: etcdserverpb.Watch/Watch — the bidi stream on async_rpc.h's reactors, a thin
// adapter from each stream to a WatchSession, all fed by one WatchHub (watch_hub.h explains how
// events flow and why none is lost or repeated).
//
// Besides the session it owns, each stream honours the `hasleader=true` metadata that etcdctl
// and clientv3 send (WithRequireLeader): the stream is refused at once when the node knows no
// leader, and ended with etcd_errors::kNoLeader after `leaderless_checks_max`
// consecutive checks (one per election timeout) without one — etcd's monitorLeader rule.
// Half-closing the request side does not end the stream (as in etcd); the client cancels it.
//
// Who calls it: EpochNode registers it with the gRPC server and routes the KvStateMachine
// applied hook to hub()->Publish(). Threading: the node's watch loop (one thread) runs the hub's
// dispatch strand and the progress and leader timers; history reads run on the node's read pool;
// stream callbacks run on gRPC's threads. Destroy it after the gRPC server has shut down and the
// watch loop has stopped.
#pragma once

#include <asio.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/metrics_text.h"
#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/watch/watch_hub.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

struct WatchServiceOptions {
  WatchHubOptions hub;
  // progress_notify period (etcd's default is 10 minutes).
  std::chrono::milliseconds progress_interval = std::chrono::minutes(10);
  // How often the leader is checked for hasleader streams (etcd: one election timeout); also
  // how often the hub checks that no revision bypassed it (WatchHub::Resync).
  std::chrono::milliseconds leader_check_interval{1000};
  int leaderless_checks_max = 3;
};

class WatchService final : public etcdserverpb::Watch::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  // `io`: the watch loop (server/daemon/src/executors.h), one thread.
  WatchService(NodeContext& node, asio::io_context& io, WatchServiceOptions options);
  ~WatchService() override;
  WatchService(const WatchService&) = delete;
  WatchService& operator=(const WatchService&) = delete;

  // Where applied events go (KvStateMachine's applied hook calls Publish on it).
  [[nodiscard]] const std::shared_ptr<WatchHub>& hub() const { return hub_; }
  // The watchers' part of /metrics.
  void RenderMetrics(MetricsText& m) const;

  rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>* Watch(
      rpc::CallContext* context);

 private:
  class Stream;

  void ScheduleProgressTick();
  void ScheduleLeaderCheck();
  void CheckLeader();

  NodeContext& node_;
  const WatchServiceOptions options_;
  asio::io_context& io_;
  std::shared_ptr<WatchHub> hub_;
  asio::steady_timer progress_timer_;  // io_ thread only
  asio::steady_timer leader_timer_;    // io_ thread only
  int leaderless_checks_ = 0;          // io_ thread only

  std::mutex streams_mu_;
  std::vector<std::weak_ptr<Stream>> leader_streams_;  // hasleader streams; guarded by streams_mu_
};

}  // namespace epoch::server
