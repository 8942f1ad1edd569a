// etcdctl's client TLS flags (--cacert, --cert, --key, --insecure-skip-tls-verify) for the load
// tools (epoch_bench, epoch_lease_load, epoch_watch_load), filling epoch::client::TlsOptions.
//
// Threading: called while the flags are set up, before parsing.
#pragma once

#include <CLI/CLI.hpp>

#include "epoch/client/tls.h"

namespace epoch::bench {

inline void AddTlsFlags(CLI::App& app, client::TlsOptions* tls) {
  app.add_option("--cacert", tls->ca_file, "TLS: verify the servers with this CA bundle");
  app.add_option("--cert", tls->cert_file, "TLS: client certificate");
  app.add_option("--key", tls->key_file, "TLS: client key");
  app.add_flag("--insecure-skip-tls-verify", tls->insecure_skip_verify,
               "TLS without verifying the servers' certificates");
}

}  // namespace epoch::bench
