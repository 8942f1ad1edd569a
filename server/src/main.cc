// epochd: one node of an Epoch cluster. Parses flags (CLI11), validates them, and runs an
// EpochNode until SIGINT or SIGTERM.
#include <absl/synchronization/mutex.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <thread>

#include "epoch/server/epoch_node.h"
#include "epoch/server/snapshot_restore.h"

namespace {

using epoch::server::NodeConfig;

struct Flags {
  std::string listen_client = "127.0.0.1:2379";
  std::string listen_peer = "127.0.0.1:2380";
  std::string listen_metrics;
  std::string initial_cluster;
  std::string initial_cluster_clients;
  std::string log_level = "info";
  int tick_ms = 10;
  std::string restore_snapshot;
  std::string peer_dial_override;
};

void AddFlags(CLI::App& app, Flags& f, NodeConfig& c) {
  app.add_option("--name", c.name, "This member's name (must appear in --initial-cluster)")
      ->required();
  app.add_option("--data-dir", c.data_dir, "Directory for the WAL and the state machine")
      ->required();
  app.add_option("--listen-client-urls", f.listen_client, "host:port serving the etcd v3 gRPC API");
  app.add_option("--listen-peer-urls", f.listen_peer, "host:port for Raft traffic between members");
  app.add_option("--listen-metrics-urls", f.listen_metrics,
                 "host:port for /metrics, /health, /ready");
  app.add_option("--initial-cluster", f.initial_cluster,
                 "Peer addresses of every member: name=host:port,...")
      ->required();
  app.add_option("--initial-cluster-clients", f.initial_cluster_clients,
                 "Client addresses of every member: name=host:port,...")
      ->required();
  app.add_option("--initial-cluster-token", c.cluster_token,
                 "Distinguishes clusters; part of member IDs");
  app.add_option("--tick-ms", f.tick_ms, "Raft tick period in milliseconds")
      ->check(CLI::Range(1, 1000));
  app.add_option("--heartbeat-ticks", c.raft.heartbeat_ticks, "Ticks between leader heartbeats");
  app.add_option("--election-timeout-ticks", c.raft.election_timeout_min_ticks,
                 "Cluster election timeout floor in ticks (same on every member)");
  app.add_option("--election-jitter-ticks", c.raft.election_jitter_ticks,
                 "Random election timeout spread");
  app.add_option("--max-clock-drift", c.raft.max_clock_drift,
                 "Bound on the clock rate difference between members (0.05 = 5%)");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warn, error");
  app.add_option("--snapshot-count", c.snapshot.compaction.trigger_entries,
                 "Compact the Raft log once this many applied entries follow the last snapshot")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  app.add_option(
      "--snapshot-bytes", c.snapshot.compaction.trigger_bytes,
      "... or once this many bytes of entries were appended since (0 = no byte trigger)");
  app.add_option("--snapshot-catchup-entries", c.snapshot.compaction.keep_entries,
                 "Entries kept in the log after a compaction, for followers that lag a little");
  app.add_option("--snapshot-chunk-bytes", c.snapshot.send.chunk_bytes,
                 "Chunk size of Raft snapshot transfers to followers")
      ->check(CLI::Range(std::size_t{4096}, std::size_t{16} << 20));
  app.add_option("--peer-dial-override", f.peer_dial_override,
                 "Dial these peers elsewhere (a fault-injecting proxy): name=host:port,...");
  app.add_flag("--enable-failpoints", c.enable_failpoints,
               "Serve /failpoint/... on the metrics listener (chaos tests; server/README.md)");
  app.add_option("--restore-snapshot", f.restore_snapshot,
                 "Restore this `etcdctl snapshot save` file into the empty --data-dir as a member "
                 "of the new cluster given by --initial-cluster, then exit (server/SNAPSHOT.md)");
}

// --restore-snapshot: the etcdctl snapshot restore step of a new cluster.
int RestoreAndExit(const std::string& file, const NodeConfig& config) {
  auto restored = epoch::server::RestoreSnapshot(file, config);
  if (!restored.ok()) {
    std::cerr << "epochd: cannot restore " << file << ": " << restored.status().ToString() << "\n";
    return 1;
  }
  std::cout << fmt::format(
      "restored {} (applied index {}, term {}, revision {}, from cluster {:x}) into {} as member "
      "{} of a new {}-member cluster; its log starts after index {}\n",
      file, restored->archive.applied_index, restored->archive.applied_term,
      restored->archive.revision, restored->archive.cluster_id, config.data_dir, config.name,
      restored->voters, restored->snapshot_index);
  return 0;
}

epoch::Status Finish(const Flags& f, NodeConfig& c) {
  using epoch::server::ParseHostPort;
  auto client = ParseHostPort(f.listen_client);
  if (!client.ok()) return client.status().Annotate("--listen-client-urls");
  auto peer = ParseHostPort(f.listen_peer);
  if (!peer.ok()) return peer.status().Annotate("--listen-peer-urls");
  c.listen_client = *client;
  c.listen_peer = *peer;
  if (!f.listen_metrics.empty()) {
    auto metrics = ParseHostPort(f.listen_metrics);
    if (!metrics.ok()) return metrics.status().Annotate("--listen-metrics-urls");
    c.listen_metrics = *metrics;
  }
  c.tick = std::chrono::milliseconds(f.tick_ms);
  EPOCH_RETURN_IF_ERROR(
      epoch::server::ParseInitialCluster(f.initial_cluster, f.initial_cluster_clients, &c));
  EPOCH_RETURN_IF_ERROR(epoch::server::ParsePeerDialOverride(f.peer_dial_override, &c));
  c.raft.id = epoch::server::MemberIdFor(c.cluster_token, c.name);
  return c.Validate();
}

}  // namespace

int main(int argc, char** argv) {
  // gRPC's locks are absl::Mutex, and Debian's Abseil checks every acquisition against a global
  // lock-order graph (2 % of a write's CPU in bench/kv/PROFILE.md). Our own locks are std::mutex,
  // checked by the TSan preset instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app{"epochd: a node of an Epoch cluster (etcd v3 API, Raft, fencing tokens)"};
  Flags flags;
  NodeConfig config;
  AddFlags(app, flags, config);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(spdlog::level::from_str(flags.log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  epoch::Status valid = Finish(flags, config);
  if (!valid.ok()) {
    std::cerr << "epochd: " << valid.message() << "\n";
    return 2;
  }
  if (!flags.restore_snapshot.empty()) return RestoreAndExit(flags.restore_snapshot, config);

  // Block the stop signals in every thread; one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto node = epoch::server::EpochNode::Start(config);
  if (!node.ok()) {
    std::cerr << "epochd: " << node.status().ToString() << "\n";
    return 1;
  }
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("node={} received signal {}, shutting down", config.name, sig);
    (*node)->Shutdown();
  });
  (*node)->Wait();
  (*node)->Shutdown();
  // Wake the signal waiter if we stopped for another reason.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}
