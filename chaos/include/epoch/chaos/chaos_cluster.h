// ChaosCluster: a real epochd cluster on loopback (tests/support TestCluster) whose peer links
// all go through a ProxyNet, started with --enable-failpoints so the WAL disk can be slowed or
// stalled and a member's tick clock run fast or slow at run time, plus the cluster-wide operations
// the chaos harness needs: leadership transfer (Maintenance.MoveLeader), the convergence check
// (equal HashKV at one revision), and runtime membership: removing a slot's member and adding a
// fresh one (a new name, member ID, data directory and peer URL) as a learner that joins with
// --initial-cluster-state existing and is promoted once caught up.
//
// Slots: node index i is a slot with fixed ports (client, peer listener, metrics) and fixed proxy
// links; the member in it may change. A member added at run time is dialled by the cluster at the
// peer URL it was added with, which is a ProxyNet entry of its slot (proxy_net.h), so its links
// are faulted like every other. Peer TLS is not combined with runtime membership: an entry cannot
// read the sender out of a TLS handshake.
//
// Threading: as TestCluster — node control from the thread that created it.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/chaos/proxy_net.h"
#include "epoch/status.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"
#include "etcdserverpb/rpc.pb.h"

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
  // Members bootstrapped in the first slots; 0 = every slot (the rest wait for AddLearner).
  int initial_members = 0;
  // epochd --snapshot-count (0: epochd's default): small, so members that join or fall behind
  // catch up from a snapshot.
  int snapshot_count = 0;
  // epochd --snapshot-catchup-entries (0: its default, 5,000): the log tail kept after a
  // compaction. Small, so a follower that lags by more catches up from a snapshot.
  int snapshot_catchup_entries = 0;
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
  // GET /failpoint/clock?<query> on node i: rate=R or clear=1 (clock_failpoint.h in server/).
  [[nodiscard]] Status Clock(int i, std::string_view query);
  // Maintenance.MoveLeader sent to the leader `from`, naming node `to`.
  [[nodiscard]] Status MoveLeader(int from, int to);
  // Waits until every running node reports the same revision, then compares HashKV at it.
  // OK with the revision in `detail`; Aborted (a convergence violation) when hashes differ.
  [[nodiscard]] Status CheckConverged(std::chrono::milliseconds timeout, std::string* detail);
  // Sum of one counter of /metrics over the running nodes (0 when unreadable).
  [[nodiscard]] std::uint64_t SumMetric(std::string_view name);

  // --- runtime membership (Cluster service through any running member) ---
  // Removes the member of `slot` (MemberRemove; an unknown outcome is settled by MemberList),
  // waits for its process to exit (a removed member exits by itself; a killed one is gone
  // already) and wipes its data directory. The slot is then empty.
  [[nodiscard]] Status RemoveMember(int slot, std::chrono::milliseconds timeout);
  // Adds a fresh member as a learner in the empty `slot` (MemberAdd with a new entry peer URL)
  // and starts it with --initial-cluster-state existing. Returns its name.
  [[nodiscard]] Result<std::string> AddLearner(int slot, std::chrono::milliseconds timeout);
  // MemberPromote of `slot`'s learner, retried while it has not caught up, until `timeout`.
  [[nodiscard]] Status PromoteWhenCaughtUp(int slot, std::chrono::milliseconds timeout);
  // MemberList from the first running member that answers.
  [[nodiscard]] Result<etcdserverpb::MemberListResponse> Members();

 private:
  ChaosCluster() = default;
  // The per-node flags: where it dials each peer it was started knowing (--peer-dial-override
  // through the proxies), and its peer certificate.
  std::vector<std::string> NodeFlags(int self, const std::vector<test::NodeInfo>& infos);
  // Running, unpaused slots, the leader first when one is known.
  std::vector<int> Reachable();
  // Whether MemberList lists member `id` (nullopt when no member answered).
  std::optional<bool> Lists(std::uint64_t id);

  // Slot of every member name ever used: names are never reused.
  std::map<std::string, int> slot_of_name_;
  // Per slot: the names in its member's --initial-cluster (what --peer-dial-override may name).
  std::vector<std::vector<std::string>> known_names_;
  int next_name_ = 0;              // the next fresh member is n<next_name_>
  std::unique_ptr<ProxyNet> net_;  // outlives the nodes
  // The peer certificates (ChaosClusterOptions::peer_tls); outlives the nodes.
  std::unique_ptr<test_support::TempDir> pki_;
  std::unique_ptr<test::TestCluster> cluster_;
  bool client_tls_ = false;
};

}  // namespace epoch::chaos
