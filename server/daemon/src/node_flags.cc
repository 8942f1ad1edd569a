#include "node_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "epoch/node/jwt_tokens.h"

namespace epoch::server {

namespace {

// Milliseconds given with etcd's flags -> ticks of --tick-ms.
Status MillisToTicks(int ms, int tick_ms, const char* flag, std::int64_t* ticks) {
  if (ms % tick_ms != 0) {
    return Status::InvalidArgument(
        fmt::format("{} {} is not a multiple of --tick-ms {}", flag, ms, tick_ms));
  }
  *ticks = ms / tick_ms;
  return Status::Ok();
}

// etcd's --initial-advertise-peer-urls / --advertise-client-urls: Epoch takes every member's
// addresses from the cluster lists, so this member's own must agree with its entry.
Status CheckAdvertised(std::string_view flag, const std::string& text, const HostPort& listed,
                       std::string_view list_flag) {
  if (text.empty()) return Status::Ok();
  Result<HostPort> advertised = ParseHostPort(text);
  if (!advertised.ok()) return advertised.status().Annotate(std::string(flag));
  if (*advertised == listed) return Status::Ok();
  return Status::InvalidArgument(fmt::format("{} {} does not match this member's {} entry {}", flag,
                                             advertised->ToString(), list_flag, listed.ToString()));
}

// Without --initial-cluster-clients (etcd's way), this member's client address is the first of
// --advertise-client-urls, else of --listen-client-urls; the others' come from their
// publications (epoch/node/member_publisher.h).
Status SetOwnClientAddress(const NodeFlags& f, NodeConfig* c) {
  HostPort own = c->listen_client;
  if (!f.advertise_client.empty()) {
    Result<std::vector<HostPort>> advertised = ParseHostPortList(f.advertise_client);
    if (!advertised.ok()) return advertised.status().Annotate("--advertise-client-urls");
    own = advertised->front();
  } else if (own.host.empty() || own.host == "0.0.0.0" || own.host == "::" || own.host == "[::]") {
    return Status::InvalidArgument(
        "--advertise-client-urls is required when --listen-client-urls is a wildcard address");
  }
  for (MemberInfo& m : c->members) {
    if (m.id == c->raft.id) m.client = own;
  }
  return Status::Ok();
}

// "existing" on a data directory without state joins the running cluster the member was added
// to (daemon/src/member_join.h); on one with state it is a restart, as "new" is.
Status CheckClusterState(const std::string& state, NodeConfig* config) {
  if (state != "existing") return Status::Ok();
  std::error_code ec;
  const std::string wal = config->data_dir + "/wal";
  const bool has_state =
      std::filesystem::is_directory(wal, ec) && !std::filesystem::is_empty(wal, ec);
  config->join_existing = !has_state;
  return Status::Ok();
}

// etcd's peer TLS flags (server/peer/README.md "Peer TLS").
void AddPeerTlsFlags(CLI::App& app, NodeConfig::PeerTlsFiles& t) {
  app.add_option("--peer-cert-file", t.cert_file, "Certificate (PEM chain) of the peer port");
  app.add_option("--peer-key-file", t.key_file, "Private key (PEM) of --peer-cert-file");
  app.add_option("--peer-trusted-ca-file", t.trusted_ca_file,
                 "CA (PEM) that peers' certificates must chain to");
  app.add_flag("--peer-client-cert-auth", t.client_cert_auth,
               "Require and verify a client certificate on accepted peer connections");
  app.add_flag("--peer-auto-tls", t.auto_tls,
               "Peer TLS with a self-signed certificate made at startup (encryption only)");
  app.add_option("--peer-cert-allowed-cn", t.allowed_cn,
                 "Accept peer client certificates with this CN only");
  app.add_option("--peer-cert-allowed-hostname", t.allowed_hostname,
                 "Accept peer client certificates valid for this hostname only");
}

// The peer TLS flags agree with each other, and their files load (the error names the flag).
Status CheckPeerTls(const NodeConfig& c) {
  const NodeConfig::PeerTlsFiles& t = c.peer_tls;
  if (t.cert_file.empty() != t.key_file.empty()) {
    return Status::InvalidArgument("--peer-cert-file and --peer-key-file go together");
  }
  const bool on = !t.cert_file.empty() || t.auto_tls;
  if (!on && (t.client_cert_auth || !t.trusted_ca_file.empty() || !t.allowed_cn.empty() ||
              !t.allowed_hostname.empty())) {
    return Status::InvalidArgument(
        "--peer-trusted-ca-file, --peer-client-cert-auth and --peer-cert-allowed-* need peer TLS "
        "(--peer-cert-file or --peer-auto-tls)");
  }
  if (t.client_cert_auth && t.trusted_ca_file.empty()) {
    return Status::InvalidArgument("--peer-client-cert-auth needs --peer-trusted-ca-file");
  }
  if ((!t.allowed_cn.empty() || !t.allowed_hostname.empty()) && !t.client_cert_auth) {
    return Status::InvalidArgument("--peer-cert-allowed-cn/-hostname need --peer-client-cert-auth");
  }
  if (!on) return Status::Ok();
  return PeerTls::Create(PeerTlsOptionsOf(c)).status();
}

}  // namespace

PeerTlsOptions PeerTlsOptionsOf(const NodeConfig& c) {
  const NodeConfig::PeerTlsFiles& t = c.peer_tls;
  PeerTlsOptions o;
  o.cert_file = t.cert_file;
  o.key_file = t.key_file;
  o.trusted_ca_file = t.trusted_ca_file;
  o.client_cert_auth = t.client_cert_auth;
  o.auto_tls = t.auto_tls;
  o.allowed_cn = t.allowed_cn;
  o.allowed_hostname = t.allowed_hostname;
  o.self_name = c.name;
  return o;
}

namespace {

// epoch.v1.Idempotent's bounds (NodeConfig::IdempotencyLimits).
void AddIdempotencyFlags(CLI::App& app, NodeConfig::IdempotencyLimits& l) {
  app.add_option_function<std::int64_t>(
         "--idempotency-default-ttl-ms",
         [&l](std::int64_t ms) { l.default_ttl = std::chrono::milliseconds(ms); },
         "How long an epoch.v1.Idempotent answer is remembered when the request names no TTL "
         "(default 600000; capped by --idempotency-max-ttl-ms)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{86'400'000}));
  app.add_option_function<std::int64_t>(
         "--idempotency-max-ttl-ms",
         [&l](std::int64_t ms) { l.max_ttl = std::chrono::milliseconds(ms); },
         "Longest time an epoch.v1.Idempotent answer is remembered; longer requests are capped "
         "(default 86400000)")
      ->check(CLI::Range(std::int64_t{1000}, std::int64_t{86'400'000}));
  app.add_option("--idempotency-max-records", l.records_max,
                 "Records the idempotency table may hold (answers and client watermarks); a "
                 "keyed write past it is refused with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_option("--idempotency-max-bytes", l.bytes_max,
                 "Bytes the idempotency table may hold; a keyed write past it is refused with "
                 "RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::int64_t{1} << 16, std::int64_t{1} << 40));
}

// PREFIX-burst, PREFIX-refill-ms, PREFIX-backoff-max-ms for one epoch/failure_buckets.h limit;
// `what` says what the burst counts. The defaults shown are the limits' own.
void AddFailureLimitFlags(CLI::App& app, const std::string& prefix, const std::string& what,
                          FailureLimits* limits) {
  app.add_option(prefix + "-burst", limits->burst,
                 fmt::format("{} (default {})", what, limits->burst))
      ->check(CLI::Range(1, 1'000'000));
  app.add_option_function<std::int64_t>(
         prefix + "-refill-ms",
         [limits](std::int64_t ms) { limits->refill = std::chrono::milliseconds(ms); },
         fmt::format("One more allowed every this many ms; also the first block after the burst "
                     "(default {})",
                     limits->refill.count()))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{3'600'000}));
  app.add_option_function<std::int64_t>(
         prefix + "-backoff-max-ms",
         [limits](std::int64_t ms) { limits->backoff_max = std::chrono::milliseconds(ms); },
         fmt::format("Longest block after repeated refusals; each block doubles (default {})",
                     limits->backoff_max.count()))
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{86'400'000}));
}

}  // namespace

void AddNodeFlags(CLI::App& app, NodeFlags& f, NodeConfig& c) {
  app.add_option("--config-file", f.config_file,
                 "etcd's YAML configuration file; when given, other flags and EPOCH_*/ETCD_* "
                 "variables are ignored, as in etcd (docs/etcd-compatibility.md)");
  app.add_option("--name", c.name, "This member's name (must appear in --initial-cluster)")
      ->required();
  app.add_option("--data-dir", c.data_dir, "Directory for the WAL and the state machine")
      ->required();
  app.add_option("--listen-client-urls", f.listen_client,
                 "host:port serving the etcd v3 gRPC API (a comma-separated list listens on each)");
  app.add_option("--listen-peer-urls", f.listen_peer, "host:port for Raft traffic between members");
  app.add_option("--listen-metrics-urls", f.listen_metrics,
                 "host:port for /metrics, /health, /ready");
  app.add_option("--initial-cluster", f.initial_cluster,
                 "Peer addresses of every member: name=host:port,...")
      ->required();
  app.add_option("--initial-cluster-clients", f.initial_cluster_clients,
                 "Client addresses of every member: name=host:port,... (optional: members "
                 "publish their --advertise-client-urls to each other, as in etcd)");
  app.add_option("--initial-cluster-token", c.cluster_token,
                 "Distinguishes clusters; part of member IDs");
  app.add_option("--advertise-client-urls", f.advertise_client,
                 "This member's client URLs, published to the cluster (etcd's flag; default: "
                 "--listen-client-urls; must match its --initial-cluster-clients entry if given)");
  app.add_option(
      "--initial-advertise-peer-urls", f.advertise_peer,
      "This member's peer address (etcd's flag; must match its --initial-cluster entry)");
  app.add_option("--initial-cluster-state", f.initial_cluster_state,
                 "new (bootstrap) or existing (join the running cluster this member was added "
                 "to with etcdctl member add; a restart when --data-dir holds its state)")
      ->check(CLI::IsMember({"new", "existing"}));
  app.add_option("--tick-ms", f.tick_ms, "Raft tick period in milliseconds")
      ->check(CLI::Range(1, 1000));
  CLI::Option* hb_ticks = app.add_option("--heartbeat-ticks", c.raft.heartbeat_ticks,
                                         "Ticks between leader heartbeats");
  CLI::Option* el_ticks =
      app.add_option("--election-timeout-ticks", c.raft.election_timeout_min_ticks,
                     "Cluster election timeout floor in ticks (same on every member)");
  app.add_option("--heartbeat-interval", f.heartbeat_interval_ms,
                 "Milliseconds between leader heartbeats (etcd's flag; a multiple of --tick-ms)")
      ->check(CLI::Range(1, 60'000))
      ->excludes(hb_ticks);
  app.add_option("--election-timeout", f.election_timeout_ms,
                 "Cluster election timeout floor in milliseconds (etcd's flag; a multiple of "
                 "--tick-ms, same on every member)")
      ->check(CLI::Range(1, 600'000))
      ->excludes(el_ticks);
  app.add_option("--max-request-bytes", c.limits.max_request_bytes,
                 "Largest client request accepted, in bytes (etcd's flag)")
      ->check(CLI::Range(std::size_t{1024}, kMaxRequestBytesCap));
  app.add_option("--max-txn-ops", c.limits.max_txn_ops,
                 "Most operations in one level of a txn (etcd's flag)")
      ->check(CLI::Range(std::size_t{1}, kMaxTxnOpsCap));
  app.add_option("--max-txn-read-keys", c.limits.max_txn_read_keys,
                 "Most keys a txn with writes may read, over all its Range ops (they run on the "
                 "Raft thread); past it the txn fails and writes nothing. Read-only txns are not "
                 "bounded")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40));
  app.add_option("--quota-backend-bytes", c.quota_backend_bytes,
                 "Store size at which this member raises the NOSPACE alarm and the cluster refuses "
                 "writes that need space (etcd's flag; 0 = 2 GiB, negative = no quota)");
  app.add_option("--max-response-bytes", c.max_response_bytes,
                 "Largest Range or read-only Txn answer; larger ones fail with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::size_t{1} << 10, std::size_t{2} << 30));
  app.add_option("--keepalive-queue-max", c.keepalive_queue_max,
                 "Keep-alive answers queued on one stream for a client that does not read "
                 "them; past it the stream ends with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--max-keepalive-streams", c.keepalive_streams_max,
                 "Lease keep-alive streams open at once on this member; past it a new stream is "
                 "refused with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--max-keepalive-streams-per-address", c.keepalive_streams_per_address_max,
                 "Lease keep-alive streams open at once from one client address (an etcd client "
                 "keeps one for all its leases); past it a new stream is refused")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--max-gateway-connections", c.gateway_connections_max,
                 "HTTP/JSON gateway connections open at once on this member; past it a new "
                 "connection gets 503")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--max-gateway-connections-per-address", c.gateway_connections_per_address_max,
                 "HTTP/JSON gateway connections open at once from one client address; past it a "
                 "new connection gets 503")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--max-watchers-per-stream", c.watchers_per_stream_max,
                 "Watchers one watch stream may hold; a create past it is refused")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  app.add_option("--watch-control-queue-max", c.watch_control_queue_max,
                 "Watch create/cancel/progress replies queued on one stream for a client that "
                 "does not read them; past it the stream ends with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--job-max-epoch-changes", c.job_max_epoch_changes,
                 "epoch.v1.Jobs: changes of hands after which the next acquisition dead-letters "
                 "a job, for requests that name no limit")
      ->check(CLI::Range(std::uint32_t{1}, std::uint32_t{1} << 20));
  app.add_option("--max-concurrent-streams", c.max_concurrent_streams,
                 "Calls and streams one client connection may have open at once (etcd 3.5's "
                 "flag; the client queues the rest)")
      ->check(CLI::Range(std::uint32_t{1}, std::uint32_t{1} << 20));
  app.add_option("--grpc-memory-bytes", c.grpc_memory_bytes,
                 "Memory gRPC may use for the client port's buffers (its resource quota)")
      ->check(CLI::Range(std::size_t{16} << 20, std::size_t{1} << 40));
  app.add_option("--grpc-threads", c.grpc_threads,
                 "Threads serving client gRPC calls, each polling its own completion queue (1 "
                 "avoids thread hand-offs; more only when one core cannot keep up)")
      ->check(CLI::Range(1, 64));
  app.add_option("--election-jitter-ticks", c.raft.election_jitter_ticks,
                 "Random election timeout spread");
  app.add_option("--max-clock-drift", c.raft.max_clock_drift,
                 "Bound on the clock rate difference between members (0.05 = 5%)");
  app.add_option("--logger", f.log.logger, "zap (JSON lines), or capnslog (plain, deprecated)");
  app.add_option("--log-level", f.log.level, "debug, info, warn, error, panic, fatal");
  app.add_option("--log-outputs", f.log.outputs,
                 "default (stderr), stderr, stdout, systemd/journal or file paths, comma separated")
      ->delimiter(',');
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
  app.add_option_function<std::int64_t>(
         "--snapshot-send-timeout-ms",
         [&c](std::int64_t ms) {
           c.snapshot.archive_write_timeout = std::chrono::milliseconds(ms);
         },
         "A Maintenance.Snapshot stream whose client reads no message for this long is ended "
         "(default 30000)")
      ->check(CLI::Range(std::int64_t{100}, std::int64_t{3'600'000}));
  app.add_option("--peer-dial-override", f.peer_dial_override,
                 "Dial these peers elsewhere (a fault-injecting proxy): name=host:port,...");
  app.add_option("--peer-max-connections", c.peer_limits.max_connections,
                 "Inbound peer connections open at once; more are closed on accept")
      ->check(CLI::Range(std::size_t{4}, std::size_t{1} << 20));
  app.add_option("--peer-max-connections-per-address", c.peer_limits.max_connections_per_address,
                 "Inbound peer connections open at once from one remote address")
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 20));
  app.add_option_function<std::int64_t>(
         "--peer-frame-timeout-ms",
         [&c](std::int64_t ms) { c.peer_limits.frame_timeout = std::chrono::milliseconds(ms); },
         "A peer frame must arrive whole within this time once its first bytes did (default "
         "30000)")
      ->check(CLI::Range(std::int64_t{100}, std::int64_t{3'600'000}));
  app.add_flag("--enable-failpoints", c.enable_failpoints,
               "Serve /failpoint/... on the metrics listener (chaos tests; server/README.md)");
  app.add_flag("--force-new-cluster", c.force_new_cluster,
               "Disaster recovery (etcd's flag): restart this member on its data directory as the "
               "only member of its cluster, discarding its uncommitted entries and removing every "
               "other member (docs/runbook.md \"Lose quorum\")");
  app.add_flag("--strict-reconfig-check", c.strict_reconfig_check,
               "Refuse a membership change after which fewer than a quorum of the voters have "
               "started (etcd's flag, default true; --strict-reconfig-check=false to allow)");
  AddTlsFlags(app, f.tls, c.client_tls);
  app.add_option("--auth-token", f.auth_token,
                 "Token kind of the Auth service (etcd's flag): simple (random tokens that "
                 "every member knows) or jwt,pub-key=PATH,priv-key=PATH,sign-method="
                 "RS256|PS256|ES256|HS256,ttl=5m (signed tokens, as etcd 3.4)");
  app.add_option_function<std::int64_t>(
         "--auth-token-ttl", [&c](std::int64_t s) { c.auth_token_ttl = std::chrono::seconds(s); },
         "Seconds a simple token stays valid after its last use, on the cluster clock "
         "(etcd's flag, default 300)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{365} * 24 * 3600));
  AddFailureLimitFlags(app, "--auth-failure",
                       "Failed Authenticate attempts allowed at once per user and per client "
                       "address",
                       &c.auth_failure_limits);
  AddFailureLimitFlags(app, "--txn-read-refusal",
                       "Txns refused for --max-txn-read-keys before the log allowed at once per "
                       "client address; past them its txns that need the count are refused "
                       "unread",
                       &c.txn_read_refusal_limits);
  app.add_option("--bcrypt-cost", c.bcrypt_cost,
                 "Work of a password hash (etcd's flag): 2^(cost+7) PBKDF2-SHA256 iterations, "
                 "at most 2^30")
      ->check(CLI::Range(4, 31));
  app.add_option("--restore-snapshot", f.restore_snapshot,
                 "Restore this `etcdctl snapshot save` file into the empty --data-dir as a member "
                 "of the new cluster given by --initial-cluster, then exit (server/SNAPSHOT.md)");
  AddPeerTlsFlags(app, c.peer_tls);
  AddIdempotencyFlags(app, c.idempotency);
}

// --auth-token: "simple", or "jwt," and etcd's options, the keys read and checked here.
Status ParseAuthToken(const std::string& value, NodeConfig* c) {
  if (value == "simple") return Status::Ok();
  constexpr std::string_view kJwt = "jwt,";
  if (!value.starts_with(kJwt)) {
    return Status::InvalidArgument(
        fmt::format("--auth-token {}: expected simple or jwt,<options>", value));
  }
  Result<JwtOptions> options = ParseJwtOptions(std::string_view(value).substr(kJwt.size()));
  if (!options.ok()) return options.status().Annotate("--auth-token");
  Result<std::unique_ptr<JwtTokens>> usable = JwtTokens::Create(*options);
  if (!usable.ok()) return usable.status().Annotate("--auth-token");
  c->auth_jwt = std::move(*options);
  return Status::Ok();
}

Status FinishNodeFlags(const NodeFlags& f, NodeConfig& c) {
  Result<std::vector<HostPort>> clients = ParseHostPortList(f.listen_client);
  if (!clients.ok()) return clients.status().Annotate("--listen-client-urls");
  auto peer = ParseHostPort(f.listen_peer);
  if (!peer.ok()) return peer.status().Annotate("--listen-peer-urls");
  c.listen_client = clients->front();
  c.listen_client_extra.assign(clients->begin() + 1, clients->end());
  c.listen_peer = *peer;
  EPOCH_RETURN_IF_ERROR(FinishTlsFlags(f.tls, f.listen_client, c.client_tls));
  c.client_tls.metrics_https = f.listen_metrics.starts_with("https://");
  if (c.client_tls.metrics_https && c.client_tls.server.files.cert_file.empty() &&
      !c.client_tls.auto_tls) {
    return Status::InvalidArgument(fmt::format(
        "--listen-metrics-urls {}: https:// needs --cert-file and --key-file (or --auto-tls)",
        f.listen_metrics));
  }
  if (!f.listen_metrics.empty()) {
    auto metrics = ParseHostPort(f.listen_metrics);
    if (!metrics.ok()) return metrics.status().Annotate("--listen-metrics-urls");
    c.listen_metrics = *metrics;
  }
  c.tick = std::chrono::milliseconds(f.tick_ms);
  if (f.heartbeat_interval_ms > 0) {
    EPOCH_RETURN_IF_ERROR(MillisToTicks(f.heartbeat_interval_ms, f.tick_ms, "--heartbeat-interval",
                                        &c.raft.heartbeat_ticks));
  }
  if (f.election_timeout_ms > 0) {
    EPOCH_RETURN_IF_ERROR(MillisToTicks(f.election_timeout_ms, f.tick_ms, "--election-timeout",
                                        &c.raft.election_timeout_min_ticks));
  }
  // The adaptive election timeout may back off to 4x the floor, so that etcd's usual settings
  // (--heartbeat-interval 100 --election-timeout 1000: 100 ticks) keep room to back off.
  c.raft.max_election_timeout_ticks =
      std::max(c.raft.max_election_timeout_ticks, 4 * c.raft.election_timeout_min_ticks);
  EPOCH_RETURN_IF_ERROR(ParseInitialCluster(f.initial_cluster, f.initial_cluster_clients, &c));
  EPOCH_RETURN_IF_ERROR(ParsePeerDialOverride(f.peer_dial_override, &c));
  c.raft.id = MemberIdFor(c.cluster_token, c.name);
  if (f.initial_cluster_clients.empty()) EPOCH_RETURN_IF_ERROR(SetOwnClientAddress(f, &c));
  EPOCH_RETURN_IF_ERROR(c.Validate());
  const MemberInfo* self = c.FindMember(c.raft.id);
  EPOCH_RETURN_IF_ERROR(CheckAdvertised("--initial-advertise-peer-urls", f.advertise_peer,
                                        self->peer, "--initial-cluster"));
  if (!f.initial_cluster_clients.empty()) {
    EPOCH_RETURN_IF_ERROR(CheckAdvertised("--advertise-client-urls", f.advertise_client,
                                          self->client, "--initial-cluster-clients"));
  }
  EPOCH_RETURN_IF_ERROR(CheckPeerTls(c));
  EPOCH_RETURN_IF_ERROR(ParseAuthToken(f.auth_token, &c));
  return CheckClusterState(f.initial_cluster_state, &c);
}

}  // namespace epoch::server
