// NodeConfig: everything one epochd process is started with, parsed from its command line
// (daemon/src/main.cc) and checked before anything is opened.
//
// Membership is given etcd-style: --initial-cluster "n1=127.0.0.1:2380,n2=...,n3=..." (peer
// addresses) and --initial-cluster-clients "n1=127.0.0.1:2379,..." (client addresses, used to
// forward writes to the leader and answered by Cluster.MemberList). A member's Raft ID is a hash
// of its name and the cluster token, so every node derives the same IDs without coordination.
//
// Threading: a plain value.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "epoch/failure_buckets.h"
#include "epoch/node/jwt_tokens.h"
#include "epoch/raft/config.h"
#include "epoch/rpc/tls.h"
#include "epoch/snapshot/snapshot_options.h"
#include "epoch/state/kv_validation.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::server {

struct HostPort {
  std::string host;
  std::uint16_t port = 0;

  [[nodiscard]] std::string ToString() const;
  friend bool operator==(const HostPort&, const HostPort&) = default;
};

// "127.0.0.1:2379", "http://127.0.0.1:2379" or "localhost:2379"; InvalidArgument otherwise.
[[nodiscard]] Result<HostPort> ParseHostPort(std::string_view text);

// The largest --max-request-bytes / --max-txn-ops accepted, and what the state machine enforces.
inline constexpr std::size_t kMaxRequestBytesCap = 10u << 20;
inline constexpr std::size_t kMaxTxnOpsCap = 10'000;

struct MemberInfo {
  NodeId id;
  std::string name;
  HostPort peer;
  HostPort client;
};

// TLS on the client port (--cert-file, --key-file, --trusted-ca-file, --client-cert-auth,
// --auto-tls; docs/etcd-compatibility.md).
struct ClientTlsConfig {
  rpc::ServerTlsOptions server;
  // --auto-tls: without --cert-file/--key-file, https listeners use a self-signed certificate
  // kept under <data-dir>/fixtures/client.
  bool auto_tls = false;
  // Per --listen-client-urls entry, in order (listen_client, then listen_client_extra): whether
  // it is https://. Missing entries are plaintext.
  std::vector<bool> https;
  // --listen-metrics-urls is https://: /metrics and the probes are served over TLS with the same
  // certificate, key, CA and --client-cert-auth (as etcd's).
  bool metrics_https = false;

  [[nodiscard]] bool Https(std::size_t listener) const {
    return listener < https.size() && https[listener];
  }
  [[nodiscard]] bool Any() const;
};

// Brute-force protection of Authenticate: a token bucket of failed attempts per user and per
// client address (`burst` failures, one more every `refill`); a failure that empties a bucket
// blocks its key for `refill`, doubled by each failure after it, at most `backoff_max`.
struct NodeConfig {
  std::string name;
  std::string data_dir;
  HostPort listen_client;
  // More client listeners (--listen-client-urls with several URLs, as etcd's).
  std::vector<HostPort> listen_client_extra;
  HostPort listen_peer;
  HostPort listen_metrics;  // port 0 = no metrics endpoint
  std::string cluster_token = "epoch-cluster";
  std::vector<MemberInfo> members;  // the initial cluster, in the order given
  // Where this node dials a peer instead of its --initial-cluster address (--peer-dial-override;
  // the chaos suite puts a fault-injecting proxy there). Peers not listed are dialled directly.
  std::map<NodeId, HostPort> peer_dial_override;
  // Limits on the peer port (PeerTransportOptions; docs/etcd-compatibility.md).
  struct PeerPortLimits {
    std::size_t max_connections = 256;                // --peer-max-connections
    std::size_t max_connections_per_address = 32;     // --peer-max-connections-per-address
    std::chrono::milliseconds frame_timeout{30'000};  // --peer-frame-timeout-ms
  };
  PeerPortLimits peer_limits;
  // Peer TLS (etcd's --peer-* TLS flags; server/peer/README.md "Peer TLS"). Off when neither a
  // certificate nor auto_tls is given.
  struct PeerTlsFiles {
    std::string cert_file;          // --peer-cert-file
    std::string key_file;           // --peer-key-file
    std::string trusted_ca_file;    // --peer-trusted-ca-file
    bool client_cert_auth = false;  // --peer-client-cert-auth
    bool auto_tls = false;          // --peer-auto-tls
    std::string allowed_cn;         // --peer-cert-allowed-cn
    std::string allowed_hostname;   // --peer-cert-allowed-hostname
  };
  PeerTlsFiles peer_tls;
  // --enable-failpoints: the metrics listener serves /failpoint/... (server/README.md).
  bool enable_failpoints = false;
  // --strict-reconfig-check (etcd's, default true): the leader refuses a membership change after
  // which fewer than a quorum of the voters have started (PlanMemberChange).
  bool strict_reconfig_check = true;
  // --initial-cluster-state existing with no state in --data-dir: join the running cluster this
  // member was added to (daemon/src/member_join.h).
  bool join_existing = false;
  // This member joined a running cluster: its ID and the cluster's came from the cluster
  // (<data-dir>/member), not from --initial-cluster; its log starts empty.
  bool joined = false;
  std::uint64_t joined_cluster_id = 0;
  // --force-new-cluster (etcd's): a member restarted on its data directory after its cluster lost
  // quorum for good becomes the only member of its cluster (daemon/src/force_new_cluster.h).
  bool force_new_cluster = false;

  std::chrono::milliseconds tick{10};
  raft::Config raft;  // id filled from `name`; timing in ticks
  // Which of the cluster timing settings were given (flag, environment or config file): a given
  // one that differs from the cluster's recorded timing refuses the start; the others adopt it
  // (epoch/node/cluster_timing_keeper.h).
  struct GivenTiming {
    bool tick = false;
    bool heartbeat = false;
    bool election_timeout = false;
    bool max_clock_drift = false;
  };
  GivenTiming given_timing;

  // Client requests: how long a write waits for a leader to appear before failing.
  std::chrono::milliseconds leader_wait{3000};

  // Log compaction and snapshot transfer (server/SNAPSHOT.md).
  SnapshotOptions snapshot;
  // Client request limits (--max-request-bytes, --max-txn-ops), checked before a request is
  // proposed. The state machine checks every entry against the caps below instead, the same on
  // every member whatever its flags, so members with different limits never diverge.
  KvLimits limits;
  // --quota-backend-bytes, as etcd's: the store size at which this member raises the NOSPACE
  // alarm (server/README.md "Alarms and the space quota"). 0: the default, 2 GiB; < 0: none.
  std::int64_t quota_backend_bytes = 0;
  // --grpc-threads: threads serving client calls, each with its own completion queue
  // (server/rpc/include/epoch/rpc/async_rpc.h). One polls, reads, answers and finishes a call
  // without a thread hop.
  int grpc_threads = 1;
  ClientTlsConfig client_tls;
  // Auth (server/api AuthService): --auth-token-ttl, the life of a simple token on the cluster
  // clock after its last use; --bcrypt-cost, the work of a password hash
  // (server/api/src/auth_password.h).
  std::chrono::seconds auth_token_ttl{300};
  int bcrypt_cost = 10;
  // Failed Authenticate attempts allowed per user and per client address (server/api/src/
  // auth_failure_limiter.h): --auth-failure-burst, --auth-failure-refill-ms,
  // --auth-failure-backoff-max-ms.
  FailureLimits auth_failure_limits;
  // Txns refused for --max-txn-read-keys before the log, allowed per client address
  // (epoch/api/txn_read_throttle.h): --txn-read-refusal-burst, --txn-read-refusal-refill-ms,
  // --txn-read-refusal-backoff-max-ms.
  FailureLimits txn_read_refusal_limits{20, std::chrono::milliseconds(100),
                                        std::chrono::milliseconds(10'000)};
  // --auth-token jwt,...: signed tokens (epoch/node/jwt_tokens.h) instead of simple ones; the
  // options were checked by JwtTokens::Create when the flags were read.
  std::optional<JwtOptions> auth_jwt;
  // --keepalive-queue-max: keep-alive answers queued on one stream for a client that does not
  // read them; past it the stream ends with RESOURCE_EXHAUSTED (as etcd cuts slow readers).
  std::size_t keepalive_queue_max = 1024;
  // --max-keepalive-streams, --max-keepalive-streams-per-address: keep-alive streams open at once
  // on this member, and from one remote address (an etcd client keeps one stream for all its
  // leases); a stream past either is refused with RESOURCE_EXHAUSTED.
  std::size_t keepalive_streams_max = 10'000;
  std::size_t keepalive_streams_per_address_max = 256;
  // --max-gateway-connections, --max-gateway-connections-per-address: HTTP/JSON gateway
  // connections open at once on this member, and from one remote address; a connection past
  // either gets 503 (server/gateway).
  std::size_t gateway_connections_max = 4096;
  std::size_t gateway_connections_per_address_max = 256;
  // --max-response-bytes: the largest Range / read-only Txn answer (etcd has no such bound; its
  // gRPC send limit is 2 GiB). Larger ones are refused with RESOURCE_EXHAUSTED.
  std::size_t max_response_bytes = 64 << 20;
  // epoch.v1.Idempotent (server/api IdempotentService): --idempotency-default-ttl (a key sent with
  // ttl_ms 0), --idempotency-max-ttl (longer requests are capped), --idempotency-max-records and
  // --idempotency-max-bytes (a request that would add a record past either is refused with
  // RESOURCE_EXHAUSTED; stamped into the entry, so every member applies this member's bound).
  struct IdempotencyLimits {
    std::chrono::milliseconds default_ttl{10 * 60 * 1000};
    std::chrono::milliseconds max_ttl{24 * 60 * 60 * 1000};
    std::int64_t records_max = 1'000'000;
    std::int64_t bytes_max = std::int64_t{256} << 20;
  };
  IdempotencyLimits idempotency;
  // --max-watchers-per-stream, --watch-control-queue-max (WatchHubOptions).
  std::size_t watchers_per_stream_max = 1000;
  std::size_t watch_control_queue_max = 1024;
  // --job-max-epoch-changes: the Jobs service's default dead-letter limit (a job whose next
  // acquisition would be its (N + 2)th holder is dead-lettered instead); requests may set theirs.
  std::uint32_t job_max_epoch_changes = 3;
  // --max-concurrent-streams (etcd 3.5's flag): calls and streams one client connection may have
  // open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; a client queues the ones above it).
  std::uint32_t max_concurrent_streams = 1000;
  // --grpc-memory-bytes: gRPC's resource quota for the client port's buffers; under pressure gRPC
  // shrinks read buffers and refuses new streams instead of growing without bound.
  std::size_t grpc_memory_bytes = std::size_t{1} << 30;
  // The quota in force: quota_backend_bytes resolved (0 when there is none).
  [[nodiscard]] std::int64_t SpaceQuotaBytes() const;

  [[nodiscard]] NodeId self_id() const { return raft.id; }
  [[nodiscard]] std::uint64_t cluster_id() const;
  [[nodiscard]] const MemberInfo* FindMember(NodeId id) const;
  // The address this node dials to reach member `m`.
  [[nodiscard]] const HostPort& PeerDialAddress(const MemberInfo& m) const;

  // Every rule a running node depends on: this node is in the cluster, no duplicate names or
  // addresses, the Raft timing rules (raft::Config::Validate), a sane tick. The message names the
  // flag to fix.
  [[nodiscard]] Status Validate() const;
};

// Deterministic member ID: FNV-1a 64 of "token/name", never 0.
[[nodiscard]] NodeId MemberIdFor(std::string_view cluster_token, std::string_view name);

// Fills peer_dial_override from "name=host:port,..." (after ParseInitialCluster): every name must
// be another member of the cluster.
[[nodiscard]] Status ParsePeerDialOverride(std::string_view text, NodeConfig* config);

// "a:1,http://b:2": one or more host:port (ParseHostPort each); InvalidArgument if none.
[[nodiscard]] Result<std::vector<HostPort>> ParseHostPortList(std::string_view text);

// Fills members from the two "name=host:port,..." lists (same names in both). `clients` may be
// empty: every member's client address but this one's is then learned from
// the members' publications (NodeContext::ClientUrlsOf).
[[nodiscard]] Status ParseInitialCluster(std::string_view peers, std::string_view clients,
                                         NodeConfig* config);

}  // namespace epoch::server
