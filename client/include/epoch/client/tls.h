// TLS towards a cluster's client port, with etcdctl's options (--cacert, --cert, --key,
// --insecure-skip-tls-verify, --insecure-transport): the gRPC channel credentials for them. Used
// by Client (ClientOptions::tls), and by tools that open their own channels (bench/, chaos/).
//
// Threading: plain functions; the credentials are gRPC's, safe from any thread.
#pragma once

#include <grpcpp/security/credentials.h>

#include <memory>
#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::client {

struct TlsOptions {
  // TLS on every endpoint (etcdctl's --insecure-transport=false). TLS is also on when a file
  // below is given or an endpoint is https:// (Enabled).
  bool enabled = false;
  std::string ca_file;    // PEM CA bundle that servers' certificates must chain to; empty: the
                          // system's roots
  std::string cert_file;  // PEM client certificate, for servers with --client-cert-auth
  std::string key_file;   // its PEM private key (given with cert_file)
  // Accept any server certificate (no chain and no host name check); for tests and --auto-tls.
  bool insecure_skip_verify = false;

  // Whether these options with these endpoints ("host:port", "http://..." or "https://...") mean
  // TLS, as etcdctl decides it.
  [[nodiscard]] bool Enabled(const std::vector<std::string>& endpoints) const;
};

// The credentials for channels to `endpoints`: plaintext when TLS is not Enabled, otherwise TLS
// with the files read now. InvalidArgument naming the file when one cannot be read or holds no
// PEM data, or when only one of cert_file / key_file is given.
[[nodiscard]] Result<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsOptions& tls, const std::vector<std::string>& endpoints);

}  // namespace epoch::client
