// TLS for the client port, with etcd's flags (--cert-file, --key-file, --trusted-ca-file,
// --client-cert-auth, --auto-tls, --cipher-suites, --tls-min-version): the files checked with
// OpenSSL, gRPC's TLS server credentials over a provider that re-reads the files when they change
// (certificate rotation without a restart, as etcd re-reads them per handshake), the credentials
// a member uses to call another member's client port, and the self-signed certificate of
// --auto-tls.
//
// Who calls it: daemon/ (flags, EpochNode's client listeners and its forwarders' channels).
// Threading: plain functions; the credentials they return are gRPC's, safe from any thread.
// SetProcessTlsPolicy is process-wide and must run before any TLS credentials are created.
#pragma once

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"

namespace epoch::server::rpc {

// The files of one TLS identity, PEM encoded.
struct TlsFiles {
  std::string cert_file;        // the certificate chain, leaf first
  std::string key_file;         // its private key
  std::string trusted_ca_file;  // CA bundle that peers' certificates must chain to; may be empty
};

struct ServerTlsOptions {
  TlsFiles files;
  // Require a client certificate signed by files.trusted_ca_file (etcd's --client-cert-auth).
  bool client_cert_auth = false;
  // How often gRPC's file watcher looks for new certificate files (rotation).
  std::chrono::seconds refresh_interval{1};
};

// Loads the files with OpenSSL: a certificate chain, a private key that matches its leaf, and
// the CA bundle if given. The error names the flag: `flag_prefix` + "cert-file", ... ("--" for
// the client port's flags).
[[nodiscard]] Status CheckTlsFiles(const TlsFiles& files, std::string_view flag_prefix = "--");

// Server credentials for a TLS listener. Checks the files first (CheckTlsFiles); the certificate,
// key and CA are then re-read by gRPC every refresh_interval, and new handshakes use what was
// read last (a file that does not load keeps the previous credentials).
[[nodiscard]] Result<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options);

// Credentials for a member's own calls to another member's TLS client port: it presents its own
// certificate (so --client-cert-auth admits it) and verifies the other's against
// --trusted-ca-file, or trusts any certificate when there is no CA (--auto-tls certificates are
// self-signed, and etcd's members skip verification for them too).
[[nodiscard]] Result<std::shared_ptr<grpc::ChannelCredentials>> MakeMemberChannelCredentials(
    const ServerTlsOptions& options);

// --auto-tls: a self-signed certificate (EC P-256, valid one year, serverAuth and clientAuth)
// for `hosts` (IP addresses or DNS names, as subject alternative names), written as
// <dir>/cert.pem and <dir>/key.pem (0600) unless both exist already. Returns the file names.
[[nodiscard]] Result<TlsFiles> EnsureSelfSignedCertificate(const std::string& dir,
                                                           const std::vector<std::string>& hosts);

// --cipher-suites and --tls-min-version checked: the OpenSSL cipher list for `cipher_suites`
// (etcd's, i.e. Go's, names of TLS 1.2 suites, e.g. "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"; ""
// when none are given). TLS 1.3 suites are fixed, as in etcd. `min_version` must be "" or
// "TLS1.2": gRPC 1.51's TLS credentials negotiate TLS 1.2 or 1.3 and offer no way to raise the
// floor, so TLS1.3 is refused rather than not enforced. Errors name the flag.
[[nodiscard]] Result<std::string> OpenSslCipherList(const std::vector<std::string>& cipher_suites,
                                                    std::string_view min_version);
// Applies them to every TLS listener and channel of the process (gRPC's GRPC_SSL_CIPHER_SUITES).
// Must run before any TLS credentials are created.
[[nodiscard]] Status SetProcessTlsPolicy(const std::vector<std::string>& cipher_suites,
                                         std::string_view min_version);

// The OpenSSL name of a Go / etcd cipher suite name; empty if unknown or not a TLS 1.2 suite.
[[nodiscard]] std::string OpenSslCipherName(std::string_view go_name);

// TLS handshakes gRPC failed in this process: on the https:// client ports (a plaintext client, a
// missing or untrusted client certificate, no common protocol or cipher, a client that does not
// trust this server) and on this member's own TLS calls to other members' client ports. gRPC 1.51
// offers no hook for a failed handshake (it fails inside its TLS layer, before any credentials
// callback runs) but logs one error for each; CountTlsHandshakeFailures installs a gRPC log
// function (gpr_set_log_function) that counts those lines and prints every gRPC log line to
// stderr in gRPC's own format. Idempotent and thread-safe; GRPC_VERBOSITY=NONE silences the count.
void CountTlsHandshakeFailures();
[[nodiscard]] std::uint64_t TlsHandshakeFailures();

}  // namespace epoch::server::rpc
