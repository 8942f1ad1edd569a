// NodeContext: what every gRPC service of one node shares — the driver, the store, the
// configuration, the write path (propose here or forward to the leader) and the read path
// (linearizable or serializable). Services are thin adapters over it (docs/conventions.md §2).
//
// Threading: all methods are thread-safe. Completion callbacks run on the driver's strand, on a
// read-pool thread or on a gRPC client thread; they must not block.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "epoch/node/auth_gate.h"
#include "epoch/node/node_config.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/state/kv_store.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

class LeaderForwarder;
class PeerForwarder;
class SpaceQuota;
namespace rpc {
class ClientQueue;
}

class NodeContext {
 public:
  using WriteCallback = std::function<void(const Status&, const v1::InternalResponse&)>;
  using ReadyCallback = std::function<void(const Status&)>;

  // `peer_forwarder`: KV writes that reach a follower go to the leader over the peer link (null:
  // every forwarded write goes to the leader's client endpoint). The context owns this member's
  // space quota (config.SpaceQuotaBytes()); its periodic check runs between Start() and Stop().
  NodeContext(const NodeConfig& config, RaftDriver& driver, KvStore& store,
              asio::thread_pool& read_pool, PeerForwarder* peer_forwarder);
  ~NodeContext();

  // Proposes `request` when this node leads, forwards it to the leader when another node does
  // (KV writes over the peer link when a peer forwarder was given, others to the leader's
  // client endpoint), and waits (up to config.leader_wait and `deadline`) for a leader when
  // none is known. `done` gets the response computed at apply time. A request that needs space is
  // refused first ("database space exceeded") when the space quota does not admit it.
  void Write(v1::InternalRequest request, std::chrono::system_clock::time_point deadline,
             WriteCallback done);
  // Calls `done` once a linearizable read may be served (ReadIndex or lease), or at once for a
  // serializable read: on a read-pool thread; or, when `cheap` (a read of one key), on the
  // calling thread if no wait was needed (serializable, or the leader's lease holds) and on the
  // gRPC server's thread after a ReadIndex round. A ReadIndex round that ends without an answer
  // because the leader changed or is not known yet (an election, or only this follower's
  // pre-vote) is asked again, up to config.leader_wait: a read has no effect, so asking again is
  // always safe, and the client gets its answer rather than "leader changed".
  void ReadBarrier(bool serializable, ReadyCallback done, bool cheap = false);

  // The space quota's periodic check (it needs the read pool running). Stop() before the pool is
  // joined; idempotent.
  void Start();
  void Stop();

  void FillHeader(etcdserverpb::ResponseHeader* header) const;

  // A member's client URLs: what it published (epoch/state/published_members.h), else its
  // --initial-cluster-clients entry as "http://host:port" ("https://" when this member's first
  // client listener is TLS), else none (not published yet).
  [[nodiscard]] std::vector<std::string> ClientUrlsOf(const MemberInfo& member) const;
  // Member `id`'s first client URL (as ClientUrlsOf), "" if unknown.
  [[nodiscard]] std::string ClientUrlOf(NodeId id) const;
  // What this member presents when it calls another member's TLS client port
  // (rpc::MakeMemberChannelCredentials); null without client TLS.
  [[nodiscard]] const std::shared_ptr<grpc::ChannelCredentials>& member_credentials() const {
    return member_credentials_;
  }

  [[nodiscard]] const NodeConfig& config() const { return config_; }
  // ReadIndex rounds asked again after the leader changed or was not known (ReadBarrier).
  [[nodiscard]] std::uint64_t read_index_retries() const {
    return read_index_retries_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] RaftDriver& driver() { return driver_; }
  [[nodiscard]] KvStore& store() { return store_; }
  [[nodiscard]] asio::thread_pool& read_pool() { return read_pool_; }
  // Where this node's own gRPC client calls complete (opened by the running rpc::Server).
  [[nodiscard]] rpc::ClientQueue& client_queue() { return *client_queue_; }
  [[nodiscard]] SpaceQuota& space_quota() { return *space_quota_; }
  // Who calls and what they may do (auth_gate.h); its token table is fed by applied entries.
  [[nodiscard]] AuthGate& auth() { return auth_; }

 private:
  void ReadIndexAttempt(std::chrono::steady_clock::time_point give_up,
                        std::function<void(const Status&)> done);
  void WriteAttempt(std::shared_ptr<v1::InternalRequest> request,
                    std::chrono::steady_clock::time_point give_up, WriteCallback done);

  const NodeConfig& config_;
  RaftDriver& driver_;
  KvStore& store_;
  asio::thread_pool& read_pool_;
  std::unique_ptr<rpc::ClientQueue> client_queue_;  // before forwarder_, which uses it
  std::shared_ptr<grpc::ChannelCredentials> member_credentials_;  // before forwarder_ too
  std::unique_ptr<LeaderForwarder> forwarder_;
  PeerForwarder* const peer_forwarder_;
  asio::steady_timer::executor_type timer_executor_;
  std::atomic<std::uint64_t> read_index_retries_{0};
  AuthGate auth_;
  std::unique_ptr<SpaceQuota> space_quota_;  // last: it uses the context
};

}  // namespace epoch::server
