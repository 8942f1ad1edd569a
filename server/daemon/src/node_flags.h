// epochd's flags (CLI11): the flags, and their translation into a
// checked NodeConfig. Flags that mean what etcd's mean carry etcd's names, so scripts written
// for etcd work unchanged (server/README.md "epochd flags" lists them, and the etcd flags not
// supported yet). Epoch's own settings have their own names.
//
// Threading: used once, by main(), before anything starts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "epoch/node/node_config.h"
#include "epoch/peer/peer_tls.h"
#include "epoch/status.h"
#include "logging.h"
#include "tls_flags.h"

namespace epoch::server {

// Flags kept as text until Finish parses and cross-checks them.
struct NodeFlags {
  std::string listen_client = "127.0.0.1:2379";
  std::string listen_peer = "127.0.0.1:2380";
  std::string listen_metrics;
  std::string advertise_client;  // --advertise-client-urls: this member's own client address
  std::string advertise_peer;    // --initial-advertise-peer-urls: its own peer address
  std::string initial_cluster;
  std::string initial_cluster_clients;
  std::string initial_cluster_state = "new";
  LogOptions log;  // --logger, --log-level, --log-outputs (logging.h)
  int tick_ms = 10;
  int heartbeat_interval_ms = 0;  // etcd's --heartbeat-interval; 0 = --heartbeat-ticks
  int election_timeout_ms = 0;    // etcd's --election-timeout; 0 = --election-timeout-ticks
  std::string restore_snapshot;
  std::string auth_token = "simple";  // --auth-token: simple, or jwt,<options> (jwt_tokens.h)
  std::string peer_dial_override;
  TlsFlags tls;
  std::string config_file;  // read by ResolveArgs (config_sources.h) before parsing
};

// Registers every flag on `app`, bound to `f` and `c`.
void AddNodeFlags(CLI::App& app, NodeFlags& f, NodeConfig& c);
// After parsing: fills the rest of `c` from `f` and validates all of it. The message names the
// flag to fix.
[[nodiscard]] Status FinishNodeFlags(const NodeFlags& f, NodeConfig& c);

// The transport's TLS options from the node's peer TLS flags (this member's name for
// --peer-auto-tls).
[[nodiscard]] PeerTlsOptions PeerTlsOptionsOf(const NodeConfig& c);

}  // namespace epoch::server
