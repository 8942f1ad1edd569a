// EpochNode: one running epochd — opens the WAL and the state machine under the data
// directory, bootstraps a new member, and wires the Raft driver, the peer transport, the gRPC
// services and the metrics endpoint together. daemon/src/main.cc is a thin CLI around it; the
// integration tests start several in one process.
//
// Data directory layout: <data-dir>/wal (wal/FORMAT.md), <data-dir>/kv (RocksDB), and the files
// docs/formats.md §1 lists.
//
// Threads: server/daemon/src/executors.h owns every thread the node runs (the Raft strand, the
// peer transport and metrics endpoint, the watch and snapshot loops, the read pool, maintenance);
// besides them, the WAL's sync and preallocation threads and the gRPC completion-queue threads.
#pragma once

#include <memory>
#include <string>

#include "epoch/node/node_config.h"
#include "epoch/status.h"

namespace epoch::server {

class EpochNode {
 public:
  // Validates the configuration, opens storage and starts serving. Errors name what to fix.
  static Result<std::unique_ptr<EpochNode>> Start(NodeConfig config);
  ~EpochNode();

  // Blocks until Shutdown() is called (from another thread or a signal handler thread), until
  // this member applies its own removal from the cluster (Removed()), or until it refuses the
  // cluster's timing (Refusal()).
  void Wait();
  // This member was removed from the cluster (etcdctl member remove): epochd exits 1.
  [[nodiscard]] bool Removed() const;
  // Why this member stopped on its own because its given timing differs from the cluster's first
  // record (epoch/node/cluster_timing_keeper.h): epochd exits 2. Empty otherwise.
  [[nodiscard]] std::string Refusal() const;
  // Stops serving and closes storage. Idempotent.
  void Shutdown();

  // Whether this member has joined the cluster and applied its log: its client URLs are
  // committed and applied (etcd's "published"), it knows a leader, and it has applied every entry
  // it knows to be committed. What epochd's systemd READY=1 waits for.
  [[nodiscard]] bool JoinedAndApplied() const;

  [[nodiscard]] std::uint16_t client_port() const;
  [[nodiscard]] std::uint16_t peer_port() const;
  [[nodiscard]] std::uint16_t metrics_port() const;

  class Impl;

 private:
  explicit EpochNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace epoch::server
