#include "epoch/daemon/epoch_node.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <filesystem>
#include <future>
#include <set>

#include "client_port_mux.h"
#include "clock_failpoint.h"
#include "disk_failpoint.h"
#include "durability_watch.h"
#include "epoch/api/auth_service.h"
#include "epoch/api/cluster_service.h"
#include "epoch/api/election_service.h"
#include "epoch/api/idempotent_service.h"
#include "epoch/api/jobs_service.h"
#include "epoch/api/kv_service.h"
#include "epoch/api/lease_service.h"
#include "epoch/api/lock_service.h"
#include "epoch/api/maintenance_service.h"
#include "epoch/api/recipe_wait.h"
#include "epoch/api/settings_service.h"
#include "epoch/api/watch_service.h"
#include "epoch/gateway/gateway_http.h"
#include "epoch/lease/lease_manager.h"
#include "epoch/metrics_text.h"
#include "epoch/node/cluster_timing_keeper.h"
#include "epoch/node/member_publisher.h"
#include "epoch/node/node_context.h"
#include "epoch/node/space_quota.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/peer/peer_drops.h"
#include "epoch/peer/peer_forwarder.h"
#include "epoch/peer/peer_frame_gate.h"
#include "epoch/peer/peer_join.h"
#include "epoch/peer/peer_tls.h"
#include "epoch/peer/peer_transport.h"
#include "epoch/raft/conf_change.h"
#include "epoch/replication/kv_state_machine.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/replication/wal_log.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/snapshot/snapshot_manager.h"
#include "epoch/state/kv_store.h"
#include "epoch/state/published_members.h"
#include "epoch/wal/posix_file_system.h"
#include "epoch/wal/wal.h"
#include "etcd_metrics.h"
#include "executors.h"
#include "force_new_cluster.h"
#include "grpc_metrics.h"
#include "health_probes.h"
#include "member_join.h"
#include "metrics_http.h"
#include "node_flags.h"
#include "peer_membership.h"
#include "peer_metrics.h"
#include "process_metrics.h"
#include "removal_probe.h"
#include "tls_flags.h"

// EpochNode::Impl is built in phases, each a function that constructs its components with what
// they need (constructor injection) from the phases before it:
//
//   1. OpenStorage       the WAL, the state machine, a forced new cluster, bootstrap of a new
//                        member
//   2. BuildReplication  peer transport, Raft driver, snapshots, write forwarding over peers
//   3. BuildServices     the shared node context, leases, the gRPC services
//   4. Subscribe         what applied entries and installed snapshots notify
//   5. StartServing      threads, listeners, the driver
//
// Members are declared in construction order, so destruction runs the phases backwards;
// Shutdown() stops the running parts first, in the order it states.
namespace epoch::server {
namespace {

// The peer wire's length prefix, counted in the peer byte metrics (as etcd counts its framing).
constexpr std::size_t kFrameLengthBytes = 4;

// etcd's cluster version: the server version's major.minor, patch 0 ("3.5.0" for "3.5.2").
std::string EtcdClusterVersion(std::string_view server_version) {
  const std::size_t dot = server_version.find('.', server_version.find('.') + 1);
  return std::string(server_version.substr(0, dot)) + ".0";
}

// Raft messages to peers through the codec and the TCP transport, counted in the peer metrics.
class TransportSender final : public MessageSender {
 public:
  TransportSender(PeerTransport& transport, PeerMembership& membership, PeerMetrics& metrics)
      : transport_(transport), membership_(membership), metrics_(metrics) {}
  void Send(const raft::Message& m) override {
    std::string frame = EncodeFrame(m);
    metrics_.Sent(m.to, frame.size() + kFrameLengthBytes);
    if (m.type != raft::MessageType::kHeartbeat) return transport_.Send(m.to, std::move(frame));
    metrics_.HeartbeatSent(m.to, m.round, std::chrono::steady_clock::now());
    transport_.Send(m.to, std::move(frame), [this] { metrics_.HeartbeatSendFailed(); });
  }
  // Frames are accepted only from the applied configuration's members; new members are dialled,
  // removed ones dropped.
  void OnMembership(const raft::ConfState& conf) override { membership_.Apply(conf); }

 private:
  PeerTransport& transport_;
  PeerMembership& membership_;
  PeerMetrics& metrics_;
};

// Submits a WAL request with `submit(done)` and blocks until it is durable. `submit` returns the
// request's immediate validation status (done is not called when that is an error).
Status AwaitDurable(const std::function<Status(wal::DurableCallback)>& submit) {
  std::promise<Status> promise;
  auto future = promise.get_future();
  Status accepted = submit([&promise](const Status& s) { promise.set_value(s); });
  if (!accepted.ok()) return accepted;
  return future.get();
}

// The data directory, created 0700 if missing; an existing one open to others is narrowed to its
// owner (etcd's rule), with a warning.
Status PrepareDataDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create --data-dir {}: {}", dir, ec.message()));
  const fs::perms perms = fs::status(dir, ec).permissions();
  if (ec) return Status::IOError(fmt::format("cannot stat --data-dir {}: {}", dir, ec.message()));
  if ((perms & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none) {
    return Status::Ok();
  }
  if (existed) {
    spdlog::warn("--data-dir {} is open to other users ({:o}): restricting it to its owner (0700)",
                 dir, static_cast<unsigned>(perms));
  }
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec) return Status::IOError(fmt::format("cannot chmod --data-dir {}: {}", dir, ec.message()));
  return Status::Ok();
}

}  // namespace

class EpochNode::Impl {
 public:
  explicit Impl(NodeConfig config) : config_(std::move(config)) {}

  Status Open();
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return stopped_ || removed_ || !refusal_.empty(); });
  }
  // This member's given timing differs from the cluster's first record: it stops serving and
  // epochd exits 2 with `why` (epoch/node/cluster_timing_keeper.h).
  void Refuse(const std::string& why) {
    spdlog::critical("name={} {}: stopping", config_.name, why);
    std::lock_guard lock(mu_);
    refusal_ = why;
    cv_.notify_all();
  }
  std::string Refusal() {
    std::lock_guard lock(mu_);
    return refusal_;
  }
  // A cluster timing change reached this member: the core and the lease bounds follow it.
  void AdoptTiming(const raft::Timing& timing) {
    if (driver_->status().timing == timing) return;
    lease_manager_->SetRaftTiming(timing);
    driver_->UpdateTiming(timing, [name = config_.name](const Status& s) {
      if (!s.ok()) spdlog::error("name={} cannot run the cluster's timing: {}", name, s.ToString());
    });
  }
  // This member applied its own removal: it stops serving (Wait returns) and epochd exits 1 —
  // after kRemovedLinger, so that the answer to the removal (a leader removing itself answers
  // it) and the leadership hand-over leave first.
  static constexpr auto kRemovedLinger = std::chrono::seconds(1);
  void OnRemoved() {
    spdlog::critical("name={} node={:x} was removed from the cluster: stopping", config_.name,
                     config_.self_id());
    auto timer = std::make_shared<asio::steady_timer>(executors_.loop(Executors::Loop::kPeer),
                                                      kRemovedLinger);
    timer->async_wait([this, timer](std::error_code) {
      std::lock_guard lock(mu_);
      removed_ = true;
      cv_.notify_all();
    });
  }
  bool Removed() {
    std::lock_guard lock(mu_);
    return removed_;
  }
  void Shutdown();
  void Http(const std::string& path, MetricsHttp::Respond respond);
  HttpReply Metrics();

  // Its timing is the cluster's recorded timing from OpenStorage on (BootTiming).
  NodeConfig config_;
  // First: every component below runs on it, so it outlives them all.
  Executors executors_;

  // 1. Storage.
  wal::PosixFileSystem fs_;
  std::unique_ptr<DiskFailpoint> disk_failpoint_;  // --enable-failpoints only
  // --enable-failpoints only: the tick clock of the driver and the lease manager, and its rate.
  std::unique_ptr<ScaledClock> tick_clock_;
  std::unique_ptr<ClockFailpoint> clock_failpoint_;
  LatencyHistogram fsync_latency_;  // observed on the WAL's sync thread
  // The same fdatasyncs with etcd's buckets: ExponentialBuckets(0.001, 2, 14), 1 ms to 8.192 s.
  Histogram wal_fsync_{Histogram::ExponentialBuckets(0.001, 2, 14)};
  std::unique_ptr<wal::Wal> wal_;
  std::unique_ptr<WalLog> log_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<KvStateMachine> state_machine_;
  // Lock and Election waiters are woken by applied events; pending driver callbacks may own
  // waits that unsubscribe from it when destroyed, so it outlives the driver.
  std::unique_ptr<RecipeEventFeed> recipe_feed_;

  // 2. Replication.
  PeerDrops peer_drops_;
  std::unique_ptr<PeerMetrics> peer_metrics_;
  std::unique_ptr<PeerFrameGate> peer_gate_;
  std::unique_ptr<PeerTransport> transport_;
  std::unique_ptr<PeerMembership> membership_;
  std::unique_ptr<TransportSender> sender_;
  std::unique_ptr<DurabilityWatch> durability_;  // the driver's view of the WAL, timed
  std::unique_ptr<RaftDriver> driver_;
  std::unique_ptr<SnapshotManager> snapshots_;
  std::unique_ptr<PeerForwarder> peer_forwarder_;

  // 3. Services.
  std::unique_ptr<NodeContext> context_;
  std::unique_ptr<LeaseManager> lease_manager_;
  std::unique_ptr<rpc::Server> rpc_server_;  // the services' completion queues and threads
  // The clients of the client port's connections gRPC knows by descriptor or by a TLS relay's
  // socket, read by the services' per-address limits and recorded by client_mux_ and
  // tls_relays_ (declared after them; the relays' loop stops in Shutdown).
  rpc::ClientPeers client_peers_;
  // Txn read-count refusals per client address, for KV and Idempotent (after client_peers_).
  std::unique_ptr<TxnReadThrottle> txn_read_throttle_;
  std::unique_ptr<KvService> kv_service_;
  std::unique_ptr<IdempotentService> idempotent_service_;
  std::unique_ptr<MaintenanceService> maintenance_service_;
  std::unique_ptr<ClusterService> cluster_service_;
  std::unique_ptr<SettingsService> settings_service_;
  std::unique_ptr<EtcdLeaseService> etcd_lease_service_;
  std::unique_ptr<V1LeaseService> v1_lease_service_;
  std::unique_ptr<WatchService> watch_service_;
  std::unique_ptr<LockService> lock_service_;
  std::unique_ptr<ElectionService> election_service_;
  std::unique_ptr<JobsService> jobs_service_;
  std::unique_ptr<AuthService> auth_service_;

  // 5. Serving.
  GrpcMetrics grpc_metrics_;  // the client port's interceptors count into it
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<MemberPublisher> publisher_;
  ClusterTimingPtr booted_timing_;  // the record at start (null: none yet)
  std::unique_ptr<ClusterTimingKeeper> timing_keeper_;
  std::unique_ptr<HealthProbes> health_;
  std::unique_ptr<RemovalProbe> removal_probe_;
  std::unique_ptr<MetricsHttp> metrics_;
  // The client port: etcd's HTTP/JSON gateway, /metrics and the probes next to gRPC
  // (ClientPortMux). The gateway calls grpc_server_ through its in-process channel.
  std::unique_ptr<gateway::GatewayHttp> gateway_;
  std::unique_ptr<TlsRelays> tls_relays_;  // with an https:// client URL
  std::unique_ptr<ClientPortMux> client_mux_;
  int client_port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;  // guarded by mu_
  bool removed_ = false;  // guarded by mu_
  std::string refusal_;   // guarded by mu_

 private:
  Status OpenStorage();
  Status Bootstrap();
  void BuildReplication();
  std::shared_ptr<PeerTls> peer_tls_;  // null without peer TLS
  // A member's name from --initial-cluster, else as it published it; empty for a member added at
  // runtime that has not started yet.
  std::string MemberName(NodeId id) const {
    if (const MemberInfo* m = config_.FindMember(id); m != nullptr) return m->name;
    std::shared_ptr<const PublishedMembers> published = store_->Members();
    const PublishedMember* p = FindPublished(*published, id.value());
    return p == nullptr ? std::string() : p->name;
  }
  void StartRemovalProbe();
  // The driver's and the lease manager's monotonic clock: tick_clock_ under --enable-failpoints,
  // else empty (steady_clock).
  std::function<std::chrono::steady_clock::time_point()> TickClock() {
    if (!tick_clock_) return {};
    return [clock = tick_clock_.get()] { return clock->Now(); };
  }
  void BuildServices();
  void Subscribe();
  Status StartServing();
  Status StartClientListeners();
  void ConfigureClientServer(grpc::ServerBuilder& builder);
  std::unique_ptr<gateway::GatewayHttp> MakeGateway();
  PeerFrameGate::Routes PeerRoutes();
};

Status EpochNode::Impl::Open() {
  EPOCH_RETURN_IF_ERROR(config_.Validate());
  if (config_.cluster_token == NodeConfig().cluster_token) {
    spdlog::warn(
        "name={} uses the default --initial-cluster-token '{}': give each cluster its own token",
        config_.name, config_.cluster_token);
  }
  EPOCH_RETURN_IF_ERROR(OpenStorage());
  if (PeerTlsOptionsOf(config_).enabled()) {
    Result<std::shared_ptr<PeerTls>> tls = PeerTls::Create(PeerTlsOptionsOf(config_));
    if (!tls.ok()) return tls.status();
    peer_tls_ = *tls;
  }
  BuildReplication();
  BuildServices();
  Subscribe();
  EPOCH_RETURN_IF_ERROR(StartServing());
  spdlog::info("name={} node={:x} serving clients on {} (port {}), peers on {}", config_.name,
               config_.self_id(), config_.listen_client.ToString(), client_port_,
               config_.listen_peer.ToString());
  return Status::Ok();
}

Status EpochNode::Impl::OpenStorage() {
  EPOCH_RETURN_IF_ERROR(PrepareDataDir(config_.data_dir));
  wal::Options wal_options;
  wal_options.log = [this](wal::LogLevel level, std::string_view message) {
    if (level == wal::LogLevel::kError) {
      spdlog::error("name={} wal: {}", config_.name, message);
    } else {
      spdlog::warn("name={} wal: {}", config_.name, message);
    }
  };
  // One WAL request per Ready, whose callback only posts to the Raft strand: run it on the sync
  // thread rather than waking the WAL's completion thread first.
  wal_options.inline_callbacks = true;
  wal_options.on_sync = [this](const wal::SyncEvent& e) {
    fsync_latency_.Observe(e.sync_duration);
    wal_fsync_.Observe(e.sync_duration);
  };
  if (config_.enable_failpoints) {
    disk_failpoint_ = std::make_unique<DiskFailpoint>(fs_);
    tick_clock_ = std::make_unique<ScaledClock>();
    clock_failpoint_ = std::make_unique<ClockFailpoint>(*tick_clock_);
  }
  auto wal = wal::Wal::Open(fs_, config_.data_dir + "/wal", wal_options);
  if (!wal.ok()) return wal.status().Annotate("open WAL");
  wal_ = std::move(*wal);
  log_ = std::make_unique<WalLog>(*wal_);
  KvStoreOptions store_options;
  // PUT events carry previous values only while a watcher asked for them (the watch hub counts).
  store_options.lazy_prev_values = true;
  // Deterministic on every member: the caps, not this member's own flags (NodeConfig::limits).
  store_options.limits = KvLimits{kMaxTxnOpsCap, kMaxRequestBytesCap};
  auto store = KvStore::Open(config_.data_dir + "/kv", store_options);
  if (!store.ok()) return store.status().Annotate("open state machine");
  store_ = std::move(*store);
  // The record as the log will leave it: the store may be behind the log after a crash.
  const LoggedTiming logged =
      ScanLoggedTiming(*log_, store_->AppliedIndex(), store_->ClusterTiming());
  booted_timing_ = logged.latest;
  Result<std::optional<std::string>> timing = BootTiming(&config_, booted_timing_.get());
  if (!timing.ok()) return timing.status();
  if (timing->has_value()) spdlog::warn("name={} {}", config_.name, **timing);
  config_.raft.boot_withhold_ticks = std::max(
      config_.raft.boot_withhold_ticks, logged.longest_election_timeout_ms / config_.tick.count());
  // The initial cluster's member table, unless the store has one (the log changes it after). A
  // member that joined gets the table with the leader's snapshot.
  if (!config_.joined) {
    EPOCH_RETURN_IF_ERROR(store_->SeedMemberTable(InitialMemberTableOf(config_)));
  }
  // After the seed, whose members the forced changes remove: the table then records them removed.
  EPOCH_RETURN_IF_ERROR(ForceNewCluster(config_, *wal_, *store_));
  state_machine_ = std::make_unique<KvStateMachine>(*store_);
  recipe_feed_ = std::make_unique<RecipeEventFeed>();
  return Bootstrap();
}

// A member of the initial cluster with an empty WAL starts from the bootstrap snapshot (index 1,
// term 1, the initial voters), as raft::BootstrapSnapshot describes; a restarted node keeps what
// it has.
Status EpochNode::Impl::Bootstrap() {
  if (!wal_->LastSnapshot().IsEmpty() || wal_->LastIndex() > LogIndex(0) ||
      !wal_->InitialHardState().IsEmpty()) {
    spdlog::info("name={} node={:x} restarting: term={} commit={} last_index={} applied={}",
                 config_.name, config_.self_id(), wal_->InitialHardState().term,
                 wal_->InitialHardState().commit, wal_->LastIndex(), store_->AppliedIndex());
    return Status::Ok();
  }
  if (config_.joined) {
    // raft::BootstrapSnapshot's other case: an empty log, filled by the leader's snapshot.
    spdlog::info("name={} node={:x} joining with an empty log: waiting for the leader's snapshot",
                 config_.name, config_.self_id());
    return Status::Ok();
  }
  std::vector<NodeId> voters;
  for (const MemberInfo& m : config_.members) voters.push_back(m.id);
  raft::SnapshotMeta meta = raft::BootstrapSnapshot(voters);
  EPOCH_RETURN_IF_ERROR(AwaitDurable(
      [&](wal::DurableCallback done) { return wal_->SaveSnapshot(meta, std::move(done)); }));
  raft::HardState hs{raft::kBootstrapTerm, raft::kNoNode, raft::kBootstrapIndex};
  EPOCH_RETURN_IF_ERROR(AwaitDurable(
      [&](wal::DurableCallback done) { return wal_->SaveHardState(hs, std::move(done)); }));
  spdlog::info("name={} node={:x} bootstrapped a new member of a {}-voter cluster", config_.name,
               config_.self_id(), voters.size());
  return Status::Ok();
}

// The transport is built first (the driver sends through it) and started last: no frame reaches
// the gate's routes before the driver, the snapshots and the forwarder exist.
void EpochNode::Impl::BuildReplication() {
  std::vector<NodeId> members;
  std::vector<NodeId> peers;
  for (const MemberInfo& m : config_.members) {
    members.push_back(m.id);
    if (m.id != config_.self_id()) peers.push_back(m.id);
  }
  peer_metrics_ = std::make_unique<PeerMetrics>(peers);
  peer_gate_ = std::make_unique<PeerFrameGate>(config_.self_id(), std::move(members), peer_drops_,
                                               PeerRoutes());
  PeerTransportOptions topts;
  topts.self = config_.self_id();
  topts.cluster_id = config_.cluster_id();
  topts.listen_host = config_.listen_peer.host;
  topts.listen_port = config_.listen_peer.port;
  topts.accept_peer = [this](NodeId id) { return peer_gate_->IsMember(id); };
  topts.frame_read_timeout = config_.peer_limits.frame_timeout;
  topts.max_inbound_connections = config_.peer_limits.max_connections;
  topts.max_inbound_per_address = config_.peer_limits.max_connections_per_address;
  topts.drops = &peer_drops_;
  topts.tls = peer_tls_;
  topts.answer_join = [this](const raftpb::JoinRequest& request) {
    return AnswerJoin(config_, *store_, request).SerializeAsString();
  };
  // Names from --initial-cluster, else as the member published it (a member added at runtime has
  // none until it started and published).
  topts.member_name = [this](NodeId id) { return MemberName(id); };
  // Removed members' names are free again: a replacement may join under the same name.
  topts.member_names = [this] {
    std::set<std::uint64_t> removed;
    for (const v1::ClusterMember& m : store_->MemberTable()->members()) {
      if (m.removed()) removed.insert(m.id());
    }
    std::vector<std::string> names;
    for (const MemberInfo& m : config_.members) {
      if (!removed.contains(m.id.value())) names.push_back(m.name);
    }
    for (const PublishedMember& p : *store_->Members()) {
      if (!removed.contains(p.id)) names.push_back(p.name);
    }
    return names;
  };
  transport_ = std::make_unique<PeerTransport>(
      executors_.loop(Executors::Loop::kPeer), topts,
      [this](NodeId from, std::string frame) {
        peer_metrics_->Received(from, frame.size() + kFrameLengthBytes);
        peer_gate_->Handle(from, frame);
      },
      [this](NodeId peer) {
        driver_->Unreachable(peer);
        peer_forwarder_->PeerLost(peer);
      });
  membership_ = std::make_unique<PeerMembership>(config_, *store_, *transport_, *peer_gate_,
                                                 [this] { OnRemoved(); });
  sender_ = std::make_unique<TransportSender>(*transport_, *membership_, *peer_metrics_);

  RaftDriverOptions dopts;
  dopts.raft = config_.raft;
  dopts.tick = config_.tick;
  dopts.seed =
      config_.self_id().value() ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  dopts.clock = TickClock();
  durability_ = std::make_unique<DurabilityWatch>(*log_);
  driver_ = std::make_unique<RaftDriver>(executors_.loop(Executors::Loop::kRaft), dopts,
                                         *durability_, *state_machine_, *sender_);
  snapshots_ = std::make_unique<SnapshotManager>(
      config_.snapshot, config_.self_id(), config_.cluster_id(), config_.data_dir + "/snap",
      *store_, *log_, *driver_, executors_.loop(Executors::Loop::kSnapshot),
      [this](NodeId peer, std::string frame) {
        peer_metrics_->Sent(peer, frame.size() + kFrameLengthBytes);
        transport_->Send(peer, std::move(frame));
      },
      &peer_drops_);

  PeerForwarder::Hooks forward_hooks;
  forward_hooks.send = [this](NodeId peer, std::string frame, std::function<void()> not_sent) {
    peer_metrics_->Sent(peer, frame.size() + kFrameLengthBytes);
    transport_->Send(peer, std::move(frame), std::move(not_sent));
  };
  forward_hooks.connected = [this](NodeId peer) { return transport_->Stats(peer).connected; };
  forward_hooks.propose = [this](v1::InternalRequest request, PeerForwarder::Callback done) {
    // Forwarded writes are proposed here or refused: they never travel a second hop.
    if (driver_->status().role != raft::Role::kLeader) {
      return done(etcd_errors::kNotLeader.ToStatus(), {});
    }
    driver_->Propose(std::move(request), std::move(done));
  };
  forward_hooks.on_drop = [this](FrameDrop reason) { peer_drops_.Count(reason); };
  peer_forwarder_ = std::make_unique<PeerForwarder>(executors_.read_pool().get_executor(),
                                                    std::move(forward_hooks));
}

void EpochNode::Impl::BuildServices() {
  context_ = std::make_unique<NodeContext>(config_, *driver_, *store_, executors_.read_pool(),
                                           peer_forwarder_.get());
  LeaseOptions lease_options;
  lease_options.clock = TickClock();  // the driver's: the lease and the cluster clock tick with it
  lease_manager_ = std::make_unique<LeaseManager>(*context_, std::move(lease_options));
  rpc_server_ = std::make_unique<rpc::Server>(config_.grpc_threads);
  txn_read_throttle_ =
      std::make_unique<TxnReadThrottle>(config_.txn_read_refusal_limits, client_peers_);
  kv_service_ = std::make_unique<KvService>(*context_, *txn_read_throttle_);
  idempotent_service_ = std::make_unique<IdempotentService>(*context_, *txn_read_throttle_);
  maintenance_service_ = std::make_unique<MaintenanceService>(
      *context_, *snapshots_, config_.snapshot.archive_message_bytes, executors_.maintenance());
  cluster_service_ = std::make_unique<ClusterService>(*context_);
  settings_service_ = std::make_unique<SettingsService>(*context_);
  etcd_lease_service_ =
      std::make_unique<EtcdLeaseService>(*context_, *lease_manager_, client_peers_);
  v1_lease_service_ = std::make_unique<V1LeaseService>(*context_, *lease_manager_, client_peers_);
  WatchServiceOptions watch_options;
  watch_options.leader_check_interval = config_.tick * config_.raft.election_timeout_min_ticks;
  watch_options.hub.watchers_per_stream_max = config_.watchers_per_stream_max;
  watch_options.hub.control_queue_max = config_.watch_control_queue_max;
  watch_service_ = std::make_unique<WatchService>(
      *context_, executors_.loop(Executors::Loop::kWatch), watch_options);
  lock_service_ = std::make_unique<LockService>(*context_, *recipe_feed_);
  election_service_ = std::make_unique<ElectionService>(*context_, *recipe_feed_);
  jobs_service_ = std::make_unique<JobsService>(*context_, config_.job_max_epoch_changes);
  auth_service_ = std::make_unique<AuthService>(*context_, client_peers_);
  kv_service_->Register(*rpc_server_);
  idempotent_service_->Register(*rpc_server_);
  maintenance_service_->Register(*rpc_server_);
  cluster_service_->Register(*rpc_server_);
  settings_service_->Register(*rpc_server_);
  etcd_lease_service_->Register(*rpc_server_);
  v1_lease_service_->Register(*rpc_server_);
  watch_service_->Register(*rpc_server_);
  lock_service_->Register(*rpc_server_);
  election_service_->Register(*rpc_server_);
  jobs_service_->Register(*rpc_server_);
  auth_service_->Register(*rpc_server_);
  // The services just registered, each method listed at zero in /metrics from the start.
  for (const char* served :
       {etcdserverpb::KV::service_full_name(), etcdserverpb::Maintenance::service_full_name(),
        etcdserverpb::Cluster::service_full_name(), etcdserverpb::Lease::service_full_name(),
        v1::Lease::service_full_name(), v1::Idempotent::service_full_name(),
        etcdserverpb::Watch::service_full_name(), v3lockpb::Lock::service_full_name(),
        v3electionpb::Election::service_full_name(), etcdserverpb::Auth::service_full_name(),
        v1::Jobs::service_full_name(), v1::Settings::service_full_name()}) {
    grpc_metrics_.PreRegister(served);
  }
}

// Every applied revision's events go to the watch hub (a copy; the strand never waits on it) and
// to the Lock/Election feed. An installed snapshot makes the store's revision jump: watchers
// catch up from history, lock/election waiters re-read the store. The hooks hold the hub weakly:
// it dies with watch_service_, before the state machine and the snapshots.
void EpochNode::Impl::Subscribe() {
  std::weak_ptr<WatchHub> weak_hub = watch_service_->hub();
  state_machine_->AddAppliedHook([weak_hub](LogIndex, const ApplyResult& r) {
    if (auto hub = weak_hub.lock()) hub->Publish(r.revision, r.events);
  });
  state_machine_->AddAppliedHook([feed = recipe_feed_.get()](LogIndex, const ApplyResult& r) {
    feed->Publish(r.revision, r.events);
  });
  AuthTokens* tokens = &context_->auth().tokens();
  tokens->OnAppliedUpTo(state_machine_->AppliedIndex());
  state_machine_->AddAppliedHook(
      [tokens](LogIndex index, const ApplyResult& r) { tokens->OnApplied(index, r); });
  snapshots_->AddInstalledHook(
      [weak_hub, feed = recipe_feed_.get(), tokens](const raft::SnapshotMeta& meta) {
        if (auto hub = weak_hub.lock()) hub->Resync();
        feed->Resync();
        tokens->OnAppliedUpTo(meta.index);
      });
}

void EpochNode::Impl::StartRemovalProbe() {
  // One ask waits at most this long: a probe in progress delays the shutdown by at most one.
  static constexpr auto kAskTimeout = std::chrono::milliseconds(500);
  RemovalProbeHooks hooks;
  hooks.leader = [this] { return driver_->status().leader; };
  hooks.peers = [this] { return membership_->Dialled(); };
  hooks.ask = [this](NodeId peer, const HostPort& at, const raftpb::JoinRequest& request) {
    return AskToJoin(at.host, at.port, request, kAskTimeout, JoinTls{peer_tls_, MemberName(peer)});
  };
  hooks.on_removed = [this] { membership_->MarkRemoved(); };
  removal_probe_ = std::make_unique<RemovalProbe>(
      executors_.loop(Executors::Loop::kPeer), executors_.maintenance(),
      RemovalProbeOptions{
          .self = config_.self_id(),
          .name = config_.name,
          .cluster_id = config_.cluster_id(),
          .quiet = std::max(config_.tick * config_.raft.max_election_timeout_ticks * 3,
                            std::chrono::milliseconds(1000))},
      std::move(hooks));
  removal_probe_->Start();
}

Status EpochNode::Impl::StartServing() {
  executors_.Start();
  EPOCH_RETURN_IF_ERROR(snapshots_->Start());
  EPOCH_RETURN_IF_ERROR(transport_->Start());
  membership_->Start();
  context_->Start();
  health_ = std::make_unique<HealthProbes>(executors_.loop(Executors::Loop::kPeer), *driver_,
                                           *store_, *durability_,
                                           config_.tick * config_.raft.durability_stall_ticks);
  StartRemovalProbe();
  EPOCH_RETURN_IF_ERROR(StartClientListeners());
  // This member's client URL for the others (its --initial-cluster-clients entry, else the
  // advertised or listened address; the port picked when the flag said 0).
  HostPort own = config_.FindMember(config_.self_id())->client;
  if (own.port == 0)
    own = HostPort{config_.listen_client.host, static_cast<std::uint16_t>(client_port_)};
  const char* scheme = config_.client_tls.Https(0) ? "https://" : "http://";
  publisher_ = std::make_unique<MemberPublisher>(*context_,
                                                 std::vector<std::string>{scheme + own.ToString()});
  publisher_->Start();
  timing_keeper_ = std::make_unique<ClusterTimingKeeper>(
      *context_, booted_timing_,
      ClusterTimingKeeper::Hooks{
          .adopt = [this](const raft::Timing& timing) { AdoptTiming(timing); },
          .refuse = [this](const std::string& why) { Refuse(why); }});
  timing_keeper_->Start();
  if (config_.listen_metrics.port != 0) {
    // Over TLS the gateway serves the listener (the metrics and probes through Http, and etcd's
    // JSON API), as it serves the HTTP side of an https:// client URL.
    MetricsHttp::TlsServe tls_serve;
    std::optional<rpc::ServerTlsOptions> tls;
    if (config_.client_tls.metrics_https) {
      tls = config_.client_tls.server;
      tls_serve = [this](asio::ip::tcp::socket s, std::shared_ptr<asio::ssl::context> context) {
        gateway_->ServeTls(std::move(s), std::move(context));
      };
    }
    metrics_ = std::make_unique<MetricsHttp>(
        executors_.loop(Executors::Loop::kPeer),
        [this](const std::string& p, MetricsHttp::Respond r) { Http(p, std::move(r)); },
        std::move(tls_serve));
    EPOCH_RETURN_IF_ERROR(
        metrics_->Start(config_.listen_metrics.host, config_.listen_metrics.port, tls));
  }
  DriverHooks hooks = lease_manager_->Hooks();
  hooks.snapshots = snapshots_.get();
  hooks.member_change = [this](const v1::InternalRequest& request, const raft::NodeStatus& leader) {
    return PlanChange(config_, *store_, request, leader);
  };
  driver_->Start(std::move(hooks));
  return Status::Ok();
}

// Every client listener is ClientPortMux's. gRPC listens on no client address itself: the
// plaintext ports hand it the connections that speak HTTP/2; with client TLS it has one TLS
// listener on loopback (rpc::MakeServerCredentials) that the https:// ports relay gRPC's
// connections to, still encrypted (tls_relay.h). The other connections go to the gateway, which
// serves /metrics and the probes too.
Status EpochNode::Impl::StartClientListeners() {
  std::shared_ptr<grpc::ServerCredentials> tls;
  if (config_.client_tls.Any()) {
    rpc::CountTlsHandshakeFailures();  // epoch_grpc_tls_handshake_failures_total
    auto made = rpc::MakeServerCredentials(config_.client_tls.server);
    if (!made.ok()) return made.status();
    tls = *made;
  }
  std::vector<HostPort> listeners{config_.listen_client};
  listeners.insert(listeners.end(), config_.listen_client_extra.begin(),
                   config_.listen_client_extra.end());
  bool any_https = false;
  for (std::size_t i = 0; i < listeners.size(); ++i) any_https |= config_.client_tls.Https(i);
  std::shared_ptr<HttpTlsContexts> https_contexts;
  if (any_https) {
    Result<std::shared_ptr<HttpTlsContexts>> made =
        HttpTlsContexts::Make(config_.client_tls.server);
    if (!made.ok()) return made.status().Annotate("--listen-client-urls https://");
    https_contexts = *std::move(made);
  }
  int relay_port = 0;
  grpc::ServerBuilder builder;
  if (any_https) builder.AddListeningPort("127.0.0.1:0", tls, &relay_port);
  ConfigureClientServer(builder);
  grpc_server_ = builder.BuildAndStart();
  if (!grpc_server_ || (any_https && relay_port == 0)) {
    return Status::IOError(
        fmt::format("cannot serve clients on {}", config_.listen_client.ToString()));
  }
  rpc_server_->Start(&context_->client_queue());
  asio::io_context& loop = executors_.loop(Executors::Loop::kPeer);
  gateway_ = MakeGateway();
  ClientPortMux::TlsRoute route;
  if (any_https) {
    tls_relays_ =
        std::make_unique<TlsRelays>(executors_.loop(Executors::Loop::kTlsRelay),
                                    asio::ip::tcp::endpoint(asio::ip::address_v4::loopback(),
                                                            static_cast<std::uint16_t>(relay_port)),
                                    client_peers_);
    route.relays = tls_relays_.get();
    route.http = [this, https_contexts](asio::ip::tcp::socket s) {
      gateway_->ServeTls(std::move(s), https_contexts->Get());
    };
  }
  client_mux_ = std::make_unique<ClientPortMux>(
      loop, *grpc_server_, client_peers_,
      [this](asio::ip::tcp::socket s) { gateway_->Serve(std::move(s)); }, std::move(route));
  for (std::size_t i = 0; i < listeners.size(); ++i) {
    Result<std::uint16_t> bound =
        client_mux_->Listen(listeners[i].host, listeners[i].port, config_.client_tls.Https(i));
    if (!bound.ok()) return bound.status();
    if (i == 0) client_port_ = *bound;
  }
  return Status::Ok();
}

// The client gRPC server's transport settings, limits, interceptors and services.
void EpochNode::Impl::ConfigureClientServer(grpc::ServerBuilder& builder) {
  // etcdctl pings every 2 s (keepalive-time) even without calls; gRPC's default policy would
  // answer GOAWAY "too_many_pings" (docs/etcd-compatibility.md, transport defaults).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // No client may hold unbounded streams or gRPC buffer memory (docs/etcd-compatibility.md §6).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             static_cast<int>(config_.max_concurrent_streams));
  grpc::ResourceQuota quota("epoch-client-port");
  quota.Resize(config_.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  // etcd's rule: the request limit plus 512 KiB of gRPC framing.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(config_.limits.max_request_bytes + (512 << 10)));
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(grpc_metrics_.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  rpc_server_->AddTo(builder);  // registers the services with the builder too
}

// etcd's gateway on the client port: the node's own gRPC services through the in-process
// channel (so auth, validation and the gRPC metrics apply as to any client), the node's /metrics
// and probes for the other paths.
std::unique_ptr<gateway::GatewayHttp> EpochNode::Impl::MakeGateway() {
  grpc::ChannelArguments args;
  // Answers as large as a gRPC client may receive (--max-response-bytes bounds them).
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  gateway::GatewayOptions options;
  // The request limit in base64 (4/3) with room for JSON's names and quotes.
  options.max_body_bytes = config_.limits.max_request_bytes / 3 * 4 + (512 << 10);
  options.server_version = kEtcdApiVersion;
  options.cluster_version = EtcdClusterVersion(kEtcdApiVersion);
  options.max_connections = config_.gateway_connections_max;
  options.max_connections_per_address = config_.gateway_connections_per_address_max;
  return std::make_unique<gateway::GatewayHttp>(
      grpc_server_->InProcessChannel(args), std::move(options),
      [this](const std::string& path, gateway::GatewayHttp::Respond respond) {
        Http(path, [respond = std::move(respond)](HttpReply reply) {
          respond(gateway::HttpAnswer{reply.code, std::move(reply.body),
                                      std::move(reply.content_type)});
        });
      });
}

// Where the frames that pass the peer gate go (on the peer loop): Raft messages to the driver,
// snapshot traffic to the snapshot manager, forwarded writes to the forwarder.
PeerFrameGate::Routes EpochNode::Impl::PeerRoutes() {
  PeerFrameGate::Routes routes;
  routes.raft = [this](raft::Message m) {
    if (m.type == raft::MessageType::kHeartbeatResponse) {
      peer_metrics_->HeartbeatAnswered(m.from, m.round, std::chrono::steady_clock::now());
    }
    driver_->Receive(std::move(m));
  };
  routes.snapshot = [this](raftpb::Message m) { snapshots_->HandleFrame(std::move(m)); };
  routes.forward_request = [this](NodeId from, const raftpb::ForwardRequest& request) {
    peer_forwarder_->Serve(from, request);
  };
  routes.forward_response = [this](NodeId from, const raftpb::ForwardResponse& response) {
    peer_forwarder_->HandleResponse(from, response);
  };
  routes.leader = [this] {
    const DriverStatus s = driver_->status();
    return std::pair{s.leader, s.term};
  };
  return routes;
}

// Stops what runs, in an order where nothing still running can reach what has stopped. Every
// step tolerates a node whose Open() failed part-way (null components).
void EpochNode::Impl::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  if (client_mux_) client_mux_->Stop();
  if (removal_probe_) removal_probe_->Stop();
  // Forwarded writes still waiting for the leader end now, or the gRPC shutdown waits for them.
  if (peer_forwarder_) peer_forwarder_->Stop();
  // So do Compact(physical) calls waiting for the store's compactor; the rest of its pass
  // resumes at the next start.
  if (store_) store_->StopCompactor();
  if (grpc_server_)
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  // gRPC has closed its connections; relays still open close with their loop.
  executors_.Stop(Executors::Loop::kTlsRelay);
  if (lease_manager_) lease_manager_->Stop();
  if (context_) context_->Stop();
  if (publisher_) publisher_->Stop();
  if (timing_keeper_) timing_keeper_->Stop();
  if (driver_) driver_->Stop();
  if (transport_) transport_->Stop();
  if (metrics_) metrics_->Stop();
  executors_.Stop(Executors::Loop::kRaft);
  executors_.Stop(Executors::Loop::kPeer);
  // The snapshot loop has stopped: the manager's own state may be cleared.
  executors_.Stop(Executors::Loop::kSnapshot);
  if (snapshots_) snapshots_->Stop();
  executors_.JoinReadPool();
  // Every component that may still finish a call has stopped.
  if (rpc_server_) rpc_server_->Stop();
  // No stream is left to feed: the watch hub and its timers go quiet; a Defragment in progress
  // finishes before the store closes.
  executors_.Stop(Executors::Loop::kWatch);
  executors_.JoinMaintenance();
  // What they started on a stream after the queues shut down ends now (rpc::Server::Stop).
  if (rpc_server_) rpc_server_->DrainRefused();
  disk_failpoint_.reset();  // a stalled fdatasync must not hang the close
  if (wal_) {
    Status s = wal_->Close();
    if (!s.ok()) spdlog::error("name={} closing the WAL: {}", config_.name, s.ToString());
  }
}

// Runs on the peer loop; the probes answer later, from the strand or a timer.
void EpochNode::Impl::Http(const std::string& path, MetricsHttp::Respond respond) {
  if (disk_failpoint_ && path.starts_with(DiskFailpoint::kPathPrefix)) {
    return respond(disk_failpoint_->Handle(path));
  }
  if (clock_failpoint_ && path.starts_with(ClockFailpoint::kPathPrefix)) {
    return respond(clock_failpoint_->Handle(path));
  }
  if (path == "/health") return health_->Health(std::move(respond));
  if (path == "/readyz" || path == "/ready") return health_->Ready(std::move(respond));
  if (path == "/livez") return health_->Live(std::move(respond));
  if (path == "/metrics") return respond(Metrics());
  respond(HttpReply{404, "not found\n"});
}

HttpReply EpochNode::Impl::Metrics() {
  const DriverStatus s = driver_->status();
  std::string out;
  MetricsText m(&out);
  driver_->RenderMetrics(m);
  lease_manager_->RenderMetrics(m);
  const wal::WalStats w = wal_->stats();
  m.Counter("epoch_wal_fsyncs_total", "WAL group-commit fdatasyncs.", w.frames);
  m.Counter("epoch_wal_bytes_total", "Bytes written to the WAL.", w.frame_bytes);
  m.Histogram("epoch_wal_fsync_seconds", "WAL fdatasync latency.", fsync_latency_);
  m.Counter("epoch_removal_probes_total",
            "Rounds of asking the peers whether this member was removed (leaderless too long).",
            removal_probe_ ? removal_probe_->probes() : 0);
  store_->RenderMetrics(m);
  context_->space_quota().RenderMetrics(m);
  m.Counter("epoch_read_index_retries_total",
            "Linearizable reads whose ReadIndex round was asked again because the leader changed "
            "or was not known (an election, or this follower's pre-vote).",
            context_->read_index_retries());
  snapshots_->RenderMetrics(m);
  peer_drops_.RenderMetrics(m);
  watch_service_->RenderMetrics(m);
  kv_service_->RenderMetrics(m);
  txn_read_throttle_->RenderMetrics(m);
  idempotent_service_->RenderMetrics(m);
  auth_service_->RenderMetrics(m);
  jobs_service_->RenderMetrics(m);
  RenderEtcdMetrics(m, EtcdMetricSources{s, store_.get(), context_->space_quota().SizeBytes(),
                                         context_->space_quota().quota_bytes(),
                                         lease_manager_->Stats().expired, &wal_fsync_});
  peer_metrics_->Render(m, [this](NodeId peer) { return transport_->Stats(peer).frames_dropped; });
  grpc_metrics_.Render(m);
  if (client_mux_) client_mux_->RenderMetrics(m);
  if (tls_relays_) tls_relays_->RenderMetrics(m);
  m.Counter("epoch_grpc_tls_handshake_failures_total",
            "TLS handshakes gRPC failed: on https:// client ports, and this member's TLS calls.",
            rpc::TlsHandshakeFailures());
  std::vector<std::pair<std::string, const MetricsHttp*>> endpoints;
  if (metrics_) endpoints.emplace_back("metrics", metrics_.get());
  if (gateway_) gateway_->RenderMetrics(m);
  MetricsHttp::RenderMetrics(m, endpoints);
  RenderProcessMetrics(m);
  return {200, std::move(out)};
}

EpochNode::EpochNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EpochNode::~EpochNode() { Shutdown(); }

Result<std::unique_ptr<EpochNode>> EpochNode::Start(NodeConfig config) {
  EPOCH_RETURN_IF_ERROR(PrepareClientTls(config));
  EPOCH_RETURN_IF_ERROR(PrepareDataDir(config.data_dir));
  std::error_code ec;
  const bool fresh = std::filesystem::is_empty(config.data_dir + "/wal", ec) || ec;
  EPOCH_RETURN_IF_ERROR(PrepareMembership(&config, fresh));
  auto impl = std::make_unique<Impl>(std::move(config));
  Status s = impl->Open();
  if (!s.ok()) {
    impl->Shutdown();
    return s;
  }
  return std::unique_ptr<EpochNode>(new EpochNode(std::move(impl)));
}

void EpochNode::Wait() { impl_->Wait(); }
bool EpochNode::Removed() const { return impl_->Removed(); }
std::string EpochNode::Refusal() const { return impl_->Refusal(); }
void EpochNode::Shutdown() { impl_->Shutdown(); }
bool EpochNode::JoinedAndApplied() const {
  const DriverStatus s = impl_->driver_->status();
  return impl_->publisher_->Published() && s.leader != raft::kNoNode && s.applied >= s.commit;
}
std::uint16_t EpochNode::client_port() const {
  return static_cast<std::uint16_t>(impl_->client_port_);
}
std::uint16_t EpochNode::peer_port() const { return impl_->transport_->port(); }
std::uint16_t EpochNode::metrics_port() const {
  return impl_->metrics_ ? impl_->metrics_->port() : 0;
}

}  // namespace epoch::server
