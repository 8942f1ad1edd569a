// PeerTls: the TLS contexts of the peer port (etcd's --peer-cert-file, --peer-key-file,
// --peer-trusted-ca-file, --peer-client-cert-auth, --peer-auto-tls, --peer-cert-allowed-cn,
// --peer-cert-allowed-hostname), and the checks of a peer's certificate against those flags and
// against the member it claims to be.
//
// Who calls it: EpochNode builds one from NodeConfig and hands it to PeerTransport, which runs a
// TLS handshake on every accepted and dialled connection when it is set.
//
// Threading: immutable after Create(); the contexts are shared by every connection (OpenSSL's
// SSL_CTX is safe to use from several threads once configured).
#pragma once

#include <openssl/x509.h>

#include <asio/ssl.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"

namespace epoch::server {

struct PeerTlsOptions {
  std::string cert_file;          // --peer-cert-file (PEM chain)
  std::string key_file;           // --peer-key-file (PEM)
  std::string trusted_ca_file;    // --peer-trusted-ca-file (PEM)
  bool client_cert_auth = false;  // --peer-client-cert-auth
  bool auto_tls = false;          // --peer-auto-tls: a self-signed certificate made at startup
  std::string allowed_cn;         // --peer-cert-allowed-cn
  std::string allowed_hostname;   // --peer-cert-allowed-hostname
  std::string self_name;          // this member's name: the CN and SAN of an --peer-auto-tls cert

  // Peer TLS is on with a certificate file or --peer-auto-tls.
  [[nodiscard]] bool enabled() const { return !cert_file.empty() || auto_tls; }
};

class PeerTls {
 public:
  // Loads the files (or makes the self-signed certificate). A file that does not load fails with
  // a message naming its flag.
  [[nodiscard]] static Result<std::shared_ptr<PeerTls>> Create(const PeerTlsOptions& options);

  [[nodiscard]] asio::ssl::context& server_context() { return server_; }
  [[nodiscard]] asio::ssl::context& client_context() { return client_; }
  [[nodiscard]] const PeerTlsOptions& options() const { return options_; }
  // Certificates are checked against a trusted CA: a peer's certificate names who it is. Without
  // one (--peer-auto-tls alone) the link is encrypted but not authenticated.
  [[nodiscard]] bool verifies_peers() const { return !options_.trusted_ca_file.empty(); }

  // An accepted connection's client certificate passes --peer-cert-allowed-cn and
  // --peer-cert-allowed-hostname (each only when set). `cert` may be null (none presented).
  [[nodiscard]] bool ClientAllowed(X509* cert) const;

 private:
  explicit PeerTls(PeerTlsOptions options);
  [[nodiscard]] Status Configure();

  PeerTlsOptions options_;
  asio::ssl::context server_;
  asio::ssl::context client_;
};

// The certificate's subject CN followed by its SAN DNS names.
[[nodiscard]] std::vector<std::string> CertificateNames(X509* cert);
// The certificate names the member: its CN or one of its SAN DNS names equals `member_name`
// exactly. False for a null certificate or an empty name.
[[nodiscard]] bool CertificateNamesMember(X509* cert, std::string_view member_name);
// --peer-cert-allowed-cn / --peer-cert-allowed-hostname, as etcd's: the CN equals `allowed_cn`,
// the certificate is valid for host `allowed_hostname` (X509_check_host). Empty = not checked.
[[nodiscard]] bool CertificateAllowed(X509* cert, std::string_view allowed_cn,
                                      std::string_view allowed_hostname);

struct PemKeyPair {
  std::string cert_pem;
  std::string key_pem;
};
// A self-signed P-256 certificate valid for a year, CN and SAN DNS `name` (and "localhost", IP
// 127.0.0.1), made with OpenSSL: --peer-auto-tls.
[[nodiscard]] Result<PemKeyPair> MakeSelfSignedCertificate(std::string_view name);

struct X509Deleter {
  void operator()(X509* cert) const { X509_free(cert); }
};
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
// Parses one PEM certificate (tests, --peer-auto-tls); null if it does not parse.
[[nodiscard]] X509Ptr ParseCertificatePem(std::string_view pem);

}  // namespace epoch::server
