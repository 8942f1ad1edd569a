// epochd: one node of an Epoch cluster. Parses flags (CLI11), validates them, and runs an
// EpochNode until SIGINT or SIGTERM.
#include <absl/synchronization/mutex.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <iostream>
#include <thread>

#include "config_sources.h"
#include "epoch/daemon/epoch_node.h"
#include "epoch/daemon/snapshot_restore.h"
#include "logging.h"
#include "node_flags.h"
#include "systemd_notify.h"

extern char** environ;

namespace {

using epoch::server::NodeConfig;

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

}  // namespace

int main(int argc, char** argv) {
  // gRPC's locks are absl::Mutex, and Debian's Abseil checks every acquisition against a global
  // lock-order graph (2 % of a write's CPU in bench/kv/PROFILE.md). Our own locks are std::mutex,
  // checked by the TSan preset instead.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Everything epochd creates (the data directory, the WAL, the state machine, snapshots) is
  // its owner's alone: directories 0700, files 0600, as etcd's.
  ::umask(077);
  CLI::App app{"epochd: a node of an Epoch cluster (etcd v3 API, Raft, fencing tokens)"};
  epoch::server::NodeFlags flags;
  NodeConfig config;
  epoch::server::AddNodeFlags(app, flags, config);
  app.set_version_flag("--version", "epochd " EPOCH_VERSION);
  auto resolved = epoch::server::ResolveArgs(app, std::vector<std::string>(argv + 1, argv + argc),
                                             epoch::server::EnvironmentFrom(environ));
  if (!resolved.ok()) {
    std::cerr << "epochd: " << resolved.status().message() << "\n";
    return 2;
  }
  try {
    std::vector<std::string> reversed(resolved->args.rbegin(), resolved->args.rend());
    app.parse(reversed);  // CLI11 takes a vector in reverse order
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto log_warnings = epoch::server::SetUpLogging(flags.log);
  if (!log_warnings.ok()) {
    std::cerr << "epochd: " << log_warnings.status().message() << "\n";
    return 2;
  }
  for (const std::string& warning : *log_warnings) spdlog::warn("{}", warning);
  for (const std::string& warning : resolved->warnings) spdlog::warn("{}", warning);
  config.given_timing = {
      .tick = app.count("--tick-ms") > 0,
      .heartbeat = app.count("--heartbeat-interval") + app.count("--heartbeat-ticks") > 0,
      .election_timeout =
          app.count("--election-timeout") + app.count("--election-timeout-ticks") > 0,
      .max_clock_drift = app.count("--max-clock-drift") > 0};
  epoch::Status valid = epoch::server::FinishNodeFlags(flags, config);
  if (valid.ok()) valid = epoch::server::ApplyTlsPolicy(flags.tls);
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
    const bool refused = node.status().code() == epoch::StatusCode::kInvalidArgument;
    std::cerr << "epochd: " << (refused ? node.status().message() : node.status().ToString())
              << "\n";
    // A setting the data directory or the cluster refuses is a configuration error, as a bad
    // flag is.
    return refused ? 2 : 1;
  }
  // Under systemd (Type=notify): READY=1 once the member has joined and applied its log.
  epoch::server::SystemdNotifier systemd([&node] { return (*node)->JoinedAndApplied(); });
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("name={} received signal {}, shutting down", config.name, sig);
    systemd.Stopping();
    (*node)->Shutdown();
  });
  (*node)->Wait();
  systemd.Stopping();
  (*node)->Shutdown();
  // Wake the signal waiter if we stopped for another reason.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (const std::string why = (*node)->Refusal(); !why.empty()) {
    std::cerr << "epochd: " << why << "\n";
    return 2;
  }
  if ((*node)->Removed()) {
    std::cerr << "epochd: member " << config.name << " was removed from the cluster\n";
    return 1;
  }
  return 0;
}
