#include "epoch/daemon/epoch_node.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include <array>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <latch>
#include <thread>

#include "disk_failpoint.h"
#include "epoch/api/election_service.h"
#include "epoch/api/kv_service.h"
#include "epoch/api/lease_service.h"
#include "epoch/api/lock_service.h"
#include "epoch/api/maintenance_service.h"
#include "epoch/api/recipe_wait.h"
#include "epoch/api/watch_service.h"
#include "epoch/etcd_errors.h"
#include "epoch/lease/lease_manager.h"
#include "epoch/node/member_publisher.h"
#include "epoch/node/node_context.h"
#include "epoch/node/space_quota.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/peer/peer_forwarder.h"
#include "epoch/peer/peer_transport.h"
#include "epoch/raft/conf_change.h"
#include "epoch/replication/kv_state_machine.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/replication/wal_log.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/snapshot/snapshot_manager.h"
#include "epoch/state/kv_store.h"
#include "epoch/thread_name.h"
#include "epoch/wal/posix_file_system.h"
#include "epoch/wal/wal.h"
#include "metrics_http.h"

namespace epoch::server {
namespace {

// Cumulative fsync latency histogram (Prometheus style), updated from the WAL's sync thread.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 12> kBoundsMs = {0.1, 0.25, 0.5, 1,  2,   4,
                                                       8,   16,   32,  64, 128, 512};

  void Observe(std::chrono::nanoseconds d) {
    double ms = static_cast<double>(d.count()) / 1e6;
    for (std::size_t i = 0; i < kBoundsMs.size(); ++i) {
      if (ms <= kBoundsMs[i]) buckets_[i].fetch_add(1, std::memory_order_relaxed);
    }
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_us_.fetch_add(static_cast<std::uint64_t>(d.count() / 1000), std::memory_order_relaxed);
  }

  void Render(std::string_view name, std::string* out) const {
    for (std::size_t i = 0; i < kBoundsMs.size(); ++i) {
      *out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBoundsMs[i] / 1000.0,
                          buckets_[i].load(std::memory_order_relaxed));
    }
    std::uint64_t count = count_.load(std::memory_order_relaxed);
    *out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count, name,
                        static_cast<double>(sum_us_.load(std::memory_order_relaxed)) / 1e6, name,
                        count);
  }

 private:
  std::array<std::atomic<std::uint64_t>, kBoundsMs.size()> buckets_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_us_{0};
};

// Raft messages to peers through the codec and the TCP transport.
class TransportSender final : public MessageSender {
 public:
  explicit TransportSender(PeerTransport& transport) : transport_(transport) {}
  void Send(const raft::Message& m) override { transport_.Send(m.to, EncodeFrame(m)); }
  // Membership changes at run time are not supported yet: the initial cluster is connected at
  // start, and a conf change is refused by the services.
  void OnMembership(const raft::ConfState&) override {}

 private:
  PeerTransport& transport_;
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

}  // namespace

class EpochNode::Impl {
 public:
  explicit Impl(NodeConfig config) : config_(std::move(config)) {}

  Status Open();
  void Wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return stopped_; });
  }
  void Shutdown();
  HttpReply Http(const std::string& path);

  NodeConfig config_;
  wal::PosixFileSystem fs_;
  std::unique_ptr<DiskFailpoint> disk_failpoint_;  // --enable-failpoints only
  std::unique_ptr<wal::Wal> wal_;
  std::unique_ptr<WalLog> log_;
  std::unique_ptr<KvStore> store_;
  std::unique_ptr<KvStateMachine> state_machine_;
  // Before the driver and the io_contexts: pending callbacks may own Lock/Election waits, which
  // unsubscribe from it when destroyed.
  std::unique_ptr<RecipeEventFeed> recipe_feed_;
  asio::io_context raft_io_;
  asio::io_context net_io_;
  static constexpr int kReadThreads = 2;
  asio::thread_pool read_pool_{kReadThreads};
  std::unique_ptr<PeerTransport> transport_;
  std::unique_ptr<TransportSender> sender_;
  std::unique_ptr<RaftDriver> driver_;
  std::unique_ptr<SnapshotManager> snapshots_;  // after driver_: destroyed before it
  // After transport_ and driver_ (its hooks use them), before context_ (which points to it).
  std::unique_ptr<PeerForwarder> peer_forwarder_;
  std::unique_ptr<NodeContext> context_;
  std::unique_ptr<SpaceQuota> space_quota_;     // after context_: destroyed before it
  std::unique_ptr<MemberPublisher> publisher_;  // after context_: destroyed before it
  std::unique_ptr<rpc::Server> rpc_server_;     // the services' completion queues and threads
  std::unique_ptr<KvService> kv_service_;
  std::unique_ptr<MaintenanceService> maintenance_service_;
  std::unique_ptr<ClusterService> cluster_service_;
  std::unique_ptr<LeaseManager> lease_manager_;  // after context_: destroyed before it
  std::unique_ptr<EtcdLeaseService> etcd_lease_service_;
  std::unique_ptr<V1LeaseService> v1_lease_service_;
  std::unique_ptr<WatchService> watch_service_;
  std::unique_ptr<LockService> lock_service_;
  std::unique_ptr<ElectionService> election_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<MetricsHttp> metrics_;
  std::vector<std::thread> threads_;
  LatencyHistogram fsync_latency_;
  int client_port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;  // guarded by mu_

 private:
  Status OpenStorage();
  Status Bootstrap();
  Status StartNetwork();
  void HandlePeerFrame(NodeId from, const std::string& frame);
};

Status EpochNode::Impl::OpenStorage() {
  std::error_code ec;
  std::filesystem::create_directories(config_.data_dir, ec);
  if (ec) {
    return Status::IOError(
        fmt::format("cannot create --data-dir {}: {}", config_.data_dir, ec.message()));
  }
  wal::Options wal_options;
  wal_options.log = [this](wal::LogLevel level, std::string_view message) {
    if (level == wal::LogLevel::kError) {
      spdlog::error("node={} wal: {}", config_.name, message);
    } else {
      spdlog::warn("node={} wal: {}", config_.name, message);
    }
  };
  // One WAL request per Ready, whose callback only posts to the Raft strand: run it on the sync
  // thread rather than waking the WAL's completion thread first.
  wal_options.inline_callbacks = true;
  wal_options.on_sync = [this](const wal::SyncEvent& e) {
    fsync_latency_.Observe(e.sync_duration);
  };
  if (config_.enable_failpoints) disk_failpoint_ = std::make_unique<DiskFailpoint>(fs_);
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
    spdlog::info("node={} restarting: term={} commit={} last_index={} applied={}", config_.name,
                 wal_->InitialHardState().term, wal_->InitialHardState().commit, wal_->LastIndex(),
                 store_->AppliedIndex());
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
  spdlog::info("node={} bootstrapped a new member of a {}-voter cluster", config_.name,
               voters.size());
  return Status::Ok();
}

// Runs on the transport's thread. Raft messages go to the driver, snapshot traffic to the snapshot
// manager, forwarded writes to the forwarder; anything else is dropped with a warning.
void EpochNode::Impl::HandlePeerFrame(NodeId from, const std::string& frame) {
  raftpb::Frame parsed;
  if (!parsed.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    spdlog::warn("node={} dropping a peer frame from {:x}: unparsable", config_.name, from);
    return;
  }
  switch (parsed.body_case()) {
    case raftpb::Frame::kForwardRequest:
      return peer_forwarder_->Serve(from, parsed.forward_request());
    case raftpb::Frame::kForwardResponse:
      return peer_forwarder_->HandleResponse(from, parsed.forward_response());
    case raftpb::Frame::kMessage: break;
    default:
      spdlog::warn("node={} dropping a peer frame from {:x} without a message", config_.name, from);
      return;
  }
  // Snapshot chunks and their acknowledgements never reach the core directly.
  if (IsSnapshotTraffic(parsed.message())) {
    if (snapshots_) snapshots_->HandleFrame(std::move(*parsed.mutable_message()));
    return;
  }
  Result<raft::Message> m = DecodeMessage(parsed.message());
  if (!m.ok()) {
    spdlog::warn("node={} dropping a peer frame: {}", config_.name, m.status().ToString());
    return;
  }
  driver_->Receive(std::move(*m));
}

Status EpochNode::Impl::StartNetwork() {
  // Name the read pool's threads: one task per thread, each holding its thread until all ran.
  // The latch is shared: a task may still be inside arrive_and_wait() after this function has
  // returned (a latch on this stack would leave a read thread waiting on a dead frame, and the
  // node's shutdown would hang joining it).
  auto named = std::make_shared<std::latch>(kReadThreads + 1);
  for (int i = 0; i < kReadThreads; ++i) {
    asio::post(read_pool_, [named] {
      SetThreadName("epoch-read");
      named->arrive_and_wait();
    });
  }
  named->arrive_and_wait();
  PeerTransportOptions topts;
  topts.self = config_.self_id();
  topts.cluster_id = config_.cluster_id();
  topts.listen_host = config_.listen_peer.host;
  topts.listen_port = config_.listen_peer.port;
  topts.accept_peer = [this](NodeId id) {
    return id != config_.self_id() && config_.FindMember(id) != nullptr;
  };
  transport_ = std::make_unique<PeerTransport>(
      net_io_, topts, [this](NodeId from, std::string frame) { HandlePeerFrame(from, frame); },
      [this](NodeId peer) {
        driver_->Unreachable(peer);
        if (peer_forwarder_) peer_forwarder_->PeerLost(peer);
      });
  sender_ = std::make_unique<TransportSender>(*transport_);

  RaftDriverOptions dopts;
  dopts.raft = config_.raft;
  dopts.tick = config_.tick;
  dopts.seed =
      config_.self_id().value() ^
      static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  driver_ = std::make_unique<RaftDriver>(raft_io_, dopts, *log_, *state_machine_, *sender_);
  PeerForwarder::Hooks forward_hooks;
  forward_hooks.send = [this](NodeId peer, std::string frame, std::function<void()> not_sent) {
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
  peer_forwarder_ =
      std::make_unique<PeerForwarder>(read_pool_.get_executor(), std::move(forward_hooks));
  snapshots_ = std::make_unique<SnapshotManager>(
      config_.snapshot, config_.self_id(), config_.cluster_id(), config_.data_dir + "/snap",
      *store_, *log_, *driver_,
      [this](NodeId peer, std::string frame) { transport_->Send(peer, std::move(frame)); });
  EPOCH_RETURN_IF_ERROR(snapshots_->Start());
  driver_->SetSnapshotHooks(snapshots_.get());
  // Only now may frames arrive: the frame handler reads driver_ and snapshots_ (a TSan race when
  // the transport started before they were assigned).
  EPOCH_RETURN_IF_ERROR(transport_->Start());
  for (const MemberInfo& m : config_.members) {
    const HostPort& dial = config_.PeerDialAddress(m);
    if (m.id != config_.self_id()) transport_->SetPeer(m.id, {dial.host, dial.port});
  }
  context_ = std::make_unique<NodeContext>(config_, *driver_, *store_, read_pool_);
  context_->SetPeerForwarder(peer_forwarder_.get());
  space_quota_ = std::make_unique<SpaceQuota>(*context_, config_.SpaceQuotaBytes());
  context_->SetSpaceQuota(space_quota_.get());
  space_quota_->Start();
  kv_service_ = std::make_unique<KvService>(*context_);
  maintenance_service_ = std::make_unique<MaintenanceService>(*context_);
  maintenance_service_->SetSnapshots(snapshots_.get(), config_.snapshot.archive_message_bytes);
  cluster_service_ = std::make_unique<ClusterService>(*context_);
  lease_manager_ = std::make_unique<LeaseManager>(*context_, LeaseOptions{});
  lease_manager_->Attach();
  etcd_lease_service_ = std::make_unique<EtcdLeaseService>(*context_, *lease_manager_);
  v1_lease_service_ = std::make_unique<V1LeaseService>(*context_, *lease_manager_);
  WatchServiceOptions watch_options;
  watch_options.leader_check_interval = config_.tick * config_.raft.election_timeout_min_ticks;
  watch_service_ = std::make_unique<WatchService>(*context_, watch_options);
  // Every applied revision's events go to the watch hub (a copy; the strand never waits on it).
  // The hooks hold the hub weakly: it must die with watch_service_, before the io_context its
  // dispatch strand runs on (the state machine and the snapshot manager outlive both).
  std::weak_ptr<WatchHub> weak_hub = watch_service_->hub();
  state_machine_->AddAppliedHook([weak_hub](LogIndex, const ApplyResult& r) {
    if (auto hub = weak_hub.lock()) hub->Publish(r.revision, r.events);
  });
  // Lock and Election waiters are woken by applied events too.
  state_machine_->AddAppliedHook([feed = recipe_feed_.get()](LogIndex, const ApplyResult& r) {
    feed->Publish(r.revision, r.events);
  });
  lock_service_ = std::make_unique<LockService>(*context_, *recipe_feed_);
  election_service_ = std::make_unique<ElectionService>(*context_, *recipe_feed_);
  // An installed snapshot makes the store's revision jump: watchers catch up from history,
  // lock/election waiters re-read the store.
  snapshots_->SetInstalledCallback(
      [weak_hub, feed = recipe_feed_.get()](const raft::SnapshotMeta&) {
        if (auto hub = weak_hub.lock()) hub->Resync();
        feed->Resync();
      });

  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen_client.ToString(), grpc::InsecureServerCredentials(),
                           &client_port_);
  std::vector<int> extra_ports(config_.listen_client_extra.size());
  for (std::size_t i = 0; i < extra_ports.size(); ++i) {
    builder.AddListeningPort(config_.listen_client_extra[i].ToString(),
                             grpc::InsecureServerCredentials(), &extra_ports[i]);
  }
  // etcdctl pings every 2 s (keepalive-time) even without calls; gRPC's default policy would
  // answer GOAWAY "too_many_pings" (docs/etcd-compatibility.md §5).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // etcd's rule: the request limit plus 512 KiB of gRPC framing.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(config_.limits.max_request_bytes + (512 << 10)));
  rpc_server_ = std::make_unique<rpc::Server>(config_.grpc_threads);
  kv_service_->Register(*rpc_server_);
  maintenance_service_->Register(*rpc_server_);
  cluster_service_->Register(*rpc_server_);
  etcd_lease_service_->Register(*rpc_server_);
  v1_lease_service_->Register(*rpc_server_);
  watch_service_->Register(*rpc_server_);
  lock_service_->Register(*rpc_server_);
  election_service_->Register(*rpc_server_);
  rpc_server_->AddTo(builder);  // registers the services with the builder too
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_) rpc_server_->Start(&context_->client_queue());
  if (!grpc_server_ || client_port_ == 0) {
    return Status::IOError(
        fmt::format("cannot serve clients on {}", config_.listen_client.ToString()));
  }
  for (std::size_t i = 0; i < extra_ports.size(); ++i) {
    if (extra_ports[i] == 0) {
      return Status::IOError(
          fmt::format("cannot serve clients on {}", config_.listen_client_extra[i].ToString()));
    }
  }
  // This member's client URL for the others (its --initial-cluster-clients entry, else the
  // advertised or listened address; the port picked when the flag said 0).
  HostPort own = config_.FindMember(config_.self_id())->client;
  if (own.port == 0)
    own = HostPort{config_.listen_client.host, static_cast<std::uint16_t>(client_port_)};
  publisher_ = std::make_unique<MemberPublisher>(
      *context_, std::vector<std::string>{"http://" + own.ToString()});
  publisher_->Start();

  if (config_.listen_metrics.port != 0) {
    metrics_ =
        std::make_unique<MetricsHttp>(net_io_, [this](const std::string& p) { return Http(p); });
    EPOCH_RETURN_IF_ERROR(
        metrics_->Start(config_.listen_metrics.host, config_.listen_metrics.port));
  }
  threads_.emplace_back([this] {
    SetThreadName("epoch-raft");
    auto guard = asio::make_work_guard(raft_io_);
    raft_io_.run();
  });
  threads_.emplace_back([this] {
    SetThreadName("epoch-peer");
    auto guard = asio::make_work_guard(net_io_);
    net_io_.run();
  });
  driver_->Start();
  return Status::Ok();
}

Status EpochNode::Impl::Open() {
  EPOCH_RETURN_IF_ERROR(config_.Validate());
  EPOCH_RETURN_IF_ERROR(OpenStorage());
  EPOCH_RETURN_IF_ERROR(StartNetwork());
  spdlog::info("node={} id={:x} serving clients on {} (port {}), peers on {}", config_.name,
               config_.self_id(), config_.listen_client.ToString(), client_port_,
               config_.listen_peer.ToString());
  return Status::Ok();
}

void EpochNode::Impl::Shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  // Forwarded writes still waiting for the leader end now, or the gRPC shutdown waits for them.
  if (peer_forwarder_) peer_forwarder_->Stop();
  if (grpc_server_)
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (lease_manager_) lease_manager_->Stop();
  if (space_quota_) space_quota_->Stop();
  if (publisher_) publisher_->Stop();
  if (driver_) driver_->Stop();
  if (transport_) transport_->Stop();
  if (metrics_) metrics_->Stop();
  raft_io_.stop();
  net_io_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  if (snapshots_) snapshots_->Stop();
  read_pool_.join();
  // Last: every component that may still finish a call has stopped.
  if (rpc_server_) rpc_server_->Stop();
  disk_failpoint_.reset();  // a stalled fdatasync must not hang the close
  if (wal_) {
    Status s = wal_->Close();
    if (!s.ok()) spdlog::error("node={} closing the WAL: {}", config_.name, s.ToString());
  }
}

HttpReply EpochNode::Impl::Http(const std::string& path) {
  if (disk_failpoint_ && path.starts_with(DiskFailpoint::kPathPrefix)) {
    return disk_failpoint_->Handle(path);
  }
  DriverStatus s = driver_->status();
  if (path == "/health") {
    if (s.leader == raft::kNoNode) return {503, "no leader\n"};
    return {200, "ok\n"};
  }
  if (path == "/ready") {
    if (s.leader == raft::kNoNode) return {503, "no leader\n"};
    if (s.applied < s.commit)
      return {503, fmt::format("applying: {} of {}\n", s.applied, s.commit)};
    return {200, "ready\n"};
  }
  if (path != "/metrics") return {404, "not found\n"};
  std::string out;
  auto gauge = [&out](std::string_view name, std::string_view help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
  };
  auto counter = [&out](std::string_view name, std::string_view help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  gauge("epoch_raft_term", "Current Raft term.", s.term.value());
  gauge("epoch_raft_is_leader", "1 if this node is the leader.",
        s.role == raft::Role::kLeader ? 1 : 0);
  gauge("epoch_raft_commit_index", "Commit index.", s.commit.value());
  gauge("epoch_raft_applied_index", "Applied index.", s.applied.value());
  gauge("epoch_raft_last_index", "Last log index.", s.last_index.value());
  gauge("epoch_raft_election_timeout_base_ms",
        "Adaptive election timeout base T (raised by slow disks, high RTT, split votes).",
        s.election_timeout_base_ticks * config_.tick.count());
  counter("epoch_raft_leader_changes_total", "Leader changes seen.", s.leader_changes);
  counter("epoch_proposals_committed_total", "Proposals committed.", s.proposals_committed);
  counter("epoch_proposals_failed_total", "Proposals failed.", s.proposals_failed);
  counter("epoch_reads_lease_total", "Linearizable reads served by the leader lease.",
          s.lease_reads);
  counter("epoch_reads_read_index_total", "Linearizable reads through ReadIndex.",
          s.read_index_reads);
  counter("epoch_read_index_requests_total",
          "ReadIndex rounds (the reads that queue together share one).", s.read_index_requests);
  lease_manager_->RenderMetrics(&out);
  wal::WalStats w = wal_->stats();
  counter("epoch_wal_fsyncs_total", "WAL group-commit fdatasyncs.", w.frames);
  counter("epoch_wal_bytes_total", "Bytes written to the WAL.", w.frame_bytes);
  out +=
      "# HELP epoch_wal_fsync_seconds WAL fdatasync latency.\n# TYPE epoch_wal_fsync_seconds "
      "histogram\n";
  fsync_latency_.Render("epoch_wal_fsync_seconds", &out);
  gauge("epoch_kv_revision", "Current store revision.", store_->CurrentRevision().value());
  gauge("epoch_kv_db_size_bytes", "Approximate size of the store (what the space quota counts).",
        space_quota_->SizeBytes());
  gauge("epoch_kv_quota_bytes", "The space quota (--quota-backend-bytes); 0: none.",
        space_quota_->quota_bytes());
  gauge("epoch_alarms_active", "Active alarms in the cluster (NOSPACE caps the store).",
        store_->Alarms().size());
  const KvStore::IndexSize index = store_->IndexSizeNow();
  gauge("epoch_kv_index_keys", "Keys in the in-memory per-key history (live or not compacted).",
        index.keys);
  gauge("epoch_kv_index_revisions", "Revisions in the in-memory per-key history.", index.revisions);
  SnapshotStats snap = snapshots_->stats();
  counter("epoch_snapshots_sent_total", "Raft snapshots streamed to followers.", snap.sent);
  counter("epoch_snapshots_send_failed_total", "Raft snapshot transfers that failed.",
          snap.send_failed);
  counter("epoch_snapshots_received_total", "Raft snapshots received from the leader.",
          snap.received);
  counter("epoch_snapshots_installed_total", "Received snapshots installed.", snap.installed);
  counter("epoch_log_compactions_total", "Automatic Raft log compactions.", snap.compactions);
  gauge("epoch_raft_first_index", "First index still in the Raft log.", wal_->FirstIndex().value());
  WatchHubStats watch = watch_service_->hub()->stats();
  gauge("epoch_watchers", "Watchers registered on this node.", watch.watchers);
  counter("epoch_watch_fallbacks_total", "Watchers that fell back to reading history.",
          watch.fallbacks);
  counter("epoch_watch_history_reads_total", "History reads by catching-up watchers.",
          watch.history_reads);
  return {200, std::move(out)};
}

EpochNode::EpochNode(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EpochNode::~EpochNode() { Shutdown(); }

Result<std::unique_ptr<EpochNode>> EpochNode::Start(NodeConfig config) {
  auto impl = std::make_unique<Impl>(std::move(config));
  Status s = impl->Open();
  if (!s.ok()) {
    impl->Shutdown();
    return s;
  }
  return std::unique_ptr<EpochNode>(new EpochNode(std::move(impl)));
}

void EpochNode::Wait() { impl_->Wait(); }
void EpochNode::Shutdown() { impl_->Shutdown(); }
std::uint16_t EpochNode::client_port() const {
  return static_cast<std::uint16_t>(impl_->client_port_);
}
std::uint16_t EpochNode::peer_port() const { return impl_->transport_->port(); }
std::uint16_t EpochNode::metrics_port() const {
  return impl_->metrics_ ? impl_->metrics_->port() : 0;
}

}  // namespace epoch::server
