// TestCluster: a real N-node epochd cluster on loopback for process-level tests (integration tests
// and the chaos suite). Each node is an epochd process with its own data directory and log file
// under one temporary directory; ports come from a reserved PortBlock (loopback.h).
//
// What a test can do: start the cluster and wait until it is healthy; find the leader (the node
// every live member names in Maintenance.Status); SIGKILL, SIGSTOP, SIGCONT, stop (SIGTERM) and
// restart single nodes; reach a node over gRPC; run etcdctl against any set of endpoints. Every
// wait is a condition polled until a deadline, never a fixed sleep.
//
// Cleanup: the destructor SIGKILLs and reaps every node (SIGCONT first, so paused nodes die too)
// and removes the temporary directory — unless the destructor runs during stack unwinding (a
// failed REQUIRE), KeepFiles() was called, or EPOCH_TEST_KEEP=1 is set; then it prints where the
// logs are. Nodes also die with the test process (PR_SET_PDEATHSIG), even when it is killed.
//
// Membership at run time: a cluster may be given more slots than members it bootstraps
// (ClusterOptions::initial_members); JoinNode puts a member added with MemberAdd into a slot that
// holds no running member (an empty slot, or one whose member was removed) and starts it with
// --initial-cluster-state existing; AwaitExit waits for a removed member to exit by itself. Node
// index = slot: a slot keeps its ports (client, peer listener, metrics) from member to member.
//
// Threading: node control (Start/Kill/Stop/Pause/Resume/Restart/JoinNode/AwaitExit) from one thread
// — the one that created the cluster, which must outlive it. Read-only accessors, Channel(),
// Status() and Etcdctl() are safe from any thread.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/test_support/loopback.h"
#include "epoch/test_support/process.h"
#include "epoch/test_support/temp_dir.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::test {

inline constexpr const char* kEtcdctlPath = "/usr/bin/etcdctl";

struct NodeInfo;

// Client TLS for a TestCluster: the nodes serve https:// client URLs with the server files, and
// the cluster's own clients (Channel, NodeStatus, Etcdctl) use the client files.
struct ClusterTls {
  // --trusted-ca-file of the nodes, --cacert of the clients; empty: the clients skip
  // verification (etcdctl --insecure-skip-tls-verify)
  std::string ca_file;
  std::string cert_file;         // the nodes' --cert-file; empty: --auto-tls
  std::string key_file;          // the nodes' --key-file
  std::string client_cert_file;  // the clients' certificate (etcdctl --cert); may be empty
  std::string client_key_file;
  bool client_cert_auth = false;  // the nodes' --client-cert-auth
};

struct ClusterOptions {
  std::string epochd_path;  // required: the epochd binary
  int nodes = 3;            // slots, 1..5
  // Members bootstrapped in the first slots (--initial-cluster); 0 = every slot. The other slots
  // stay empty until JoinNode.
  int initial_members = 0;
  // Raft timing for fast tests: 10 ms ticks, heartbeat every 50 ms, election floor 150 ms.
  std::vector<std::string> extra_flags = {
      "--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "15"};
  std::string cluster_token = "epoch-test";
  // Start members with etcd's flags only, as an etcd deployment script would: http:// URLs,
  // --advertise-client-urls, --initial-advertise-peer-urls, --initial-cluster-state new, client
  // listeners on 127.0.0.1 and 127.0.0.2 — and no --initial-cluster-clients.
  bool etcd_flags = false;
  // Give each member its settings in an etcd YAML config file (<data_dir>.yml, keys = flag names)
  // and start it with --config-file alone.
  bool yaml_config = false;
  std::chrono::milliseconds start_timeout = std::chrono::seconds(30);
  // More flags for node `index`, asked each time it starts (e.g. the chaos suite's
  // --peer-dial-override, which differs per node). `nodes` describes every node.
  std::function<std::vector<std::string>(int index, const std::vector<NodeInfo>& nodes)> node_flags;
  // Nodes expected to exit on their own (a start the cluster refuses): their exit fails neither
  // Start nor CheckAlive.
  std::vector<int> may_exit;
  // Client TLS (https:// client URLs) when set.
  std::optional<ClusterTls> tls;
};

// A member added at run time (MemberAdd), to be started in a slot with
// --initial-cluster-state existing.
struct JoiningMember {
  std::string name;
  std::uint64_t member_id = 0;  // what MemberAdd answered
  std::string initial_cluster;  // "name=http://host:port,...": every member, this one included
  std::string advertised_peer;  // this member's entry there: the peer URL MemberAdd was given
};

struct NodeInfo {
  std::string name;  // "n1", "n2", ... (a member that joined: the name JoinNode gave it)
  std::uint64_t member_id = 0;
  std::uint16_t client_port = 0;
  std::uint16_t peer_port = 0;
  std::uint16_t metrics_port = 0;
  std::string data_dir;
  std::string log_path;
  // Set for a member that joined at run time (JoinNode); it restarts with the same flags (its
  // data directory then says who it is).
  std::optional<JoiningMember> joined;

  [[nodiscard]] std::string client_address() const;  // "127.0.0.1:<client_port>"
};

class TestCluster {
 public:
  // Reserves ports, creates the directory, starts every node and waits (options.start_timeout)
  // until the cluster is healthy (WaitHealthy).
  [[nodiscard]] static Result<std::unique_ptr<TestCluster>> Start(ClusterOptions options);
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(nodes_.size()); }
  [[nodiscard]] const NodeInfo& node(int i) const { return nodes_.at(i).info; }
  [[nodiscard]] const std::string& dir() const { return dir_.path(); }
  [[nodiscard]] const std::string& cluster_token() const { return options_.cluster_token; }
  // Members bootstrapped by Start (the first slots).
  [[nodiscard]] int initial_members() const { return initial_members_; }
  // Index of the node with this member ID, or -1.
  [[nodiscard]] int IndexOf(std::uint64_t member_id) const;
  // "127.0.0.1:P1,127.0.0.1:P2,...": every node's client address (or the ones listed).
  [[nodiscard]] std::string Endpoints() const;
  [[nodiscard]] std::string Endpoints(const std::vector<int>& indexes) const;

  // --- node control ---
  // Starts node i (its data directory is kept across restarts). FailedPrecondition if running.
  [[nodiscard]] Status StartNode(int i);
  // SIGKILL and reap.
  void Kill(int i);
  // SIGKILL only: returns at once, while the kernel may still be tearing the process down (that
  // can take a second on a loaded machine). Kill(i) afterwards reaps it.
  void SendKill(int i);
  // SIGTERM and wait for a clean exit; SIGKILL and an error if it takes longer than `timeout`
  // or the exit status is not 0.
  [[nodiscard]] Status Stop(int i, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // SIGSTOP / SIGCONT.
  void Pause(int i);
  void Resume(int i);
  [[nodiscard]] Status Restart(int i) {
    EPOCH_RETURN_IF_ERROR(Stop(i));
    return StartNode(i);
  }
  // Puts `member` in slot i (which must hold no running process: never started, killed, stopped
  // or exited) with its own data directory and log (<dir>/<name>, <dir>/<name>.log) and starts
  // it with --initial-cluster-state existing and member.initial_cluster. The slot's ports stay.
  [[nodiscard]] Status JoinNode(int i, JoiningMember member);
  // Waits up to `timeout` for node i to exit by itself (a removed member does), reaps it and
  // counts it as stopped by the test. Returns its exit status; Timeout if it still runs.
  [[nodiscard]] Result<int> AwaitExit(int i, std::chrono::milliseconds timeout);
  // Whether node i's process exists (paused counts as running); reaps it if it died.
  [[nodiscard]] bool IsRunning(int i);
  [[nodiscard]] bool IsPaused(int i) const { return nodes_.at(i).paused; }
  [[nodiscard]] std::optional<int> ExitStatus(int i) const { return nodes_.at(i).exit_status; }
  // OK if every node the test started and did not kill or stop is still running; otherwise names
  // the first that exited on its own, with its status and log tail.
  [[nodiscard]] Status CheckAlive();

  // --- conditions ---
  // Every running, unpaused node answers /ready (a leader is known and it has applied what it
  // knows committed) and they agree on one leader. Returns the leader's index.
  [[nodiscard]] Result<int> WaitHealthy(std::chrono::milliseconds timeout);
  // Every running, unpaused node names the same leader, which is one of them and says it leads.
  // `not_index` excludes a node (e.g. the old leader, still paused). Returns the leader's index.
  [[nodiscard]] Result<int> WaitForLeader(std::chrono::milliseconds timeout,
                                          std::optional<int> not_index = std::nullopt);

  // --- talking to nodes ---
  [[nodiscard]] std::shared_ptr<grpc::Channel> Channel(int i);
  [[nodiscard]] Result<etcdserverpb::StatusResponse> NodeStatus(
      int i, std::chrono::milliseconds timeout = std::chrono::seconds(1));
  [[nodiscard]] Result<HttpResponse> Http(
      int i, std::string_view path,
      std::chrono::milliseconds timeout = std::chrono::seconds(1)) const;
  // The value of the sample `name` (a metric without labels) on node i's /metrics; nullopt when
  // the page cannot be read or has no such sample.
  [[nodiscard]] std::optional<double> Metric(int i, std::string_view name) const;
  // etcdctl (v3 API) with --endpoints set to `endpoints` (default: every node), and with
  // ClusterOptions::tls the client's --cacert, --cert and --key.
  [[nodiscard]] CommandResult Etcdctl(
      const std::vector<std::string>& args, std::string_view stdin_data = {},
      std::optional<std::string> endpoints = std::nullopt,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) const;
  // The last `bytes` of node i's log, for failure messages.
  [[nodiscard]] std::string LogTail(int i, std::size_t bytes = 4096) const;
  // etcdctl's TLS flags for ClusterOptions::tls (none without it).
  [[nodiscard]] std::vector<std::string> EtcdctlTlsFlags() const;

  void KeepFiles() { keep_files_ = true; }

 private:
  struct Node {
    NodeInfo info;
    ChildProcess process;
    bool started = false;  // started by StartNode and not since killed or stopped by the test
    bool paused = false;
    std::optional<int> exit_status;
  };

  // Creates the cluster's directory; throws std::runtime_error when it cannot.
  TestCluster(ClusterOptions options, PortBlock ports);
  [[nodiscard]] std::vector<std::string> ArgsFor(int i) const;
  // The first flags of a member that joined at run time (NodeInfo::joined).
  [[nodiscard]] std::vector<std::string> JoinedArgs(const NodeInfo& self) const;
  // ArgsFor with etcd's flags in place of Epoch's (ClusterOptions::etcd_flags).
  void EtcdStyle(int i, std::vector<std::string>* args) const;
  // https:// client URLs and the TLS flags (ClusterOptions::tls).
  void TlsStyle(std::vector<std::string>* args) const;
  [[nodiscard]] std::shared_ptr<grpc::ChannelCredentials> ClientCredentials() const;
  // The flags of `args` (program first) written to <data_dir>.yml; returns the program and
  // --config-file (ClusterOptions::yaml_config).
  std::vector<std::string> AsYamlConfig(int i, const std::vector<std::string>& args) const;
  // The leader every live node agrees on right now, if any.
  [[nodiscard]] std::optional<int> AgreedLeader(std::optional<int> not_index);

  const ClusterOptions options_;
  const PortBlock ports_;      // held for the cluster's lifetime so restarts get the same ports
  test_support::TempDir dir_;  // kept at destruction when the files are to be kept
  std::vector<Node> nodes_;
  const int initial_members_;
  // The bootstrapped members as they were: their --initial-cluster is the same at every restart,
  // whatever joined or left since (the cluster ID is derived from it).
  std::vector<NodeInfo> initial_infos_;
  bool keep_files_ = false;

  std::mutex channels_mu_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;  // guarded by channels_mu_
};

// Runs etcdctl (ETCDCTL_API=3) with `--endpoints=<endpoints>` and `args`.
[[nodiscard]] CommandResult RunEtcdctl(
    const std::string& endpoints, const std::vector<std::string>& args,
    std::string_view stdin_data = {}, std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace epoch::test
