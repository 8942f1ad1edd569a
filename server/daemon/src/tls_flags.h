// epochd's client TLS flags, as etcd's: --cert-file, --key-file, --trusted-ca-file,
// --client-cert-auth, --auto-tls, --cipher-suites, --tls-min-version; and which
// --listen-client-urls are https://.
//
// Threading: used once, by main() (through node_flags.h), before anything starts.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "epoch/node/node_config.h"
#include "epoch/status.h"

namespace epoch::server {

// Flags kept as text until FinishTlsFlags checks them.
struct TlsFlags {
  std::string cipher_suites;    // comma-separated, etcd's names
  std::string tls_min_version;  // "" = gRPC's floor, TLS1.2
};

void AddTlsFlags(CLI::App& app, TlsFlags& f, ClientTlsConfig& c);
// Marks the https:// entries of `listen_client_urls` in `c.https` and checks the flags against
// them: https:// needs --cert-file and --key-file (or --auto-tls), --client-cert-auth needs
// --trusted-ca-file. The files themselves are loaded when the node starts
// (PrepareClientTls). The message names the flag to fix.
[[nodiscard]] Status FinishTlsFlags(const TlsFlags& f, const std::string& listen_client_urls,
                                    ClientTlsConfig& c);
// --cipher-suites and --tls-min-version for the whole process (rpc::SetProcessTlsPolicy).
[[nodiscard]] Status ApplyTlsPolicy(const TlsFlags& f);

// At start: --auto-tls makes (or reuses) the self-signed certificate under
// <data-dir>/fixtures/client; then the files must load (rpc::CheckTlsFiles). Nothing to do when
// no listener is https://.
[[nodiscard]] Status PrepareClientTls(NodeConfig& config);

}  // namespace epoch::server
