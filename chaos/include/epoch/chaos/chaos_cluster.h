// ChaosCluster: a real epochd cluster on loopback (tests/support TestCluster) whose peer links
// all go through a ProxyNet, started with --enable-failpoints so the WAL disk can be slowed or
// stalled at run time, plus the cluster-wide operations the chaos harness needs: leadership
// transfer (Maintenance.MoveLeader) and the convergence check (equal HashKV at one revision).
//
// Threading: as TestCluster — node control from the thread that created it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/chaos/proxy_net.h"
#include "epoch/status.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"

namespace epoch::chaos {

struct ChaosClusterOptions {
  std::string epochd_path;
  int nodes = 3;
  std::vector<std::string> raft_flags;  // empty: TestCluster's fast defaults
  std::uint64_t seed = 1;
  // Client TLS: https:// client URLs with --auto-tls certificates; ClientEndpoints() are then
  // https://, and the chaos clients accept the self-signed certificates.
  bool client_tls = false;
  // Peer mTLS: a test CA and, for each member, a certificate naming it (test_pki.h), made in a
  // directory the cluster owns; every member starts with --peer-cert-file, --peer-key-file,
  // --peer-trusted-ca-file and --peer-client-cert-auth. The proxies carry the TLS bytes as they
  // are.
  bool peer_tls = false;
};

class ChaosCluster {
 public:
  [[nodiscard]] static Result<std::unique_ptr<ChaosCluster>> Start(ChaosClusterOptions options);

  [[nodiscard]] test::TestCluster& nodes() { return *cluster_; }
  [[nodiscard]] ProxyNet& net() { return *net_; }
  [[nodiscard]] int size() const { return cluster_->size(); }
  // Every node's client endpoint ("https://127.0.0.1:P" with client TLS, else "127.0.0.1:P").
  [[nodiscard]] std::vector<std::string> ClientEndpoints() const;

  // GET /failpoint/disk?<query> on node i (disk_failpoint.h in server/).
  [[nodiscard]] Status Disk(int i, std::string_view query);
  // Maintenance.MoveLeader sent to the leader `from`, naming node `to`.
  [[nodiscard]] Status MoveLeader(int from, int to);
  // Waits until every running node reports the same revision, then compares HashKV at it.
  // OK with the revision in `detail`; Aborted (a convergence violation) when hashes differ.
  [[nodiscard]] Status CheckConverged(std::chrono::milliseconds timeout, std::string* detail);
  // Sum of one counter of /metrics over the running nodes (0 when unreadable).
  [[nodiscard]] std::uint64_t SumMetric(std::string_view name);

 private:
  ChaosCluster() = default;
  std::unique_ptr<ProxyNet> net_;  // outlives the nodes
  // The peer certificates (ChaosClusterOptions::peer_tls); outlives the nodes.
  std::unique_ptr<test_support::TempDir> pki_;
  std::unique_ptr<test::TestCluster> cluster_;
  bool client_tls_ = false;
};

}  // namespace epoch::chaos
