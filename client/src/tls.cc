#include "epoch/client/tls.h"

#include <fmt/format.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <fstream>
#include <sstream>

namespace epoch::client {
namespace {

Result<std::string> ReadPem(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(fmt::format("{} {}: cannot open the file", what, path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return Status::InvalidArgument(fmt::format("{} {}: no PEM data", what, path));
  }
  return text.str();
}

}  // namespace

bool TlsOptions::Enabled(const std::vector<std::string>& endpoints) const {
  if (enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty()) return true;
  for (const std::string& e : endpoints) {
    if (e.starts_with("https://")) return true;
  }
  return false;
}

Result<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const TlsOptions& tls, const std::vector<std::string>& endpoints) {
  if (!tls.Enabled(endpoints)) return grpc::InsecureChannelCredentials();
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return Status::InvalidArgument("a client certificate needs both the cert and the key file");
  }
  std::string ca;
  if (!tls.ca_file.empty()) {
    Result<std::string> read = ReadPem(tls.ca_file, "CA file");
    if (!read.ok()) return read.status();
    ca = std::move(*read);
  }
  std::vector<grpc::experimental::IdentityKeyCertPair> identity;
  if (!tls.cert_file.empty()) {
    Result<std::string> cert = ReadPem(tls.cert_file, "certificate file");
    if (!cert.ok()) return cert.status();
    Result<std::string> key = ReadPem(tls.key_file, "key file");
    if (!key.ok()) return key.status();
    identity.push_back({std::move(*key), std::move(*cert)});
  }
  grpc::experimental::TlsChannelCredentialsOptions options;
  if (!ca.empty() || !identity.empty()) {
    options.set_certificate_provider(
        std::make_shared<grpc::experimental::StaticDataCertificateProvider>(ca, identity));
    if (!ca.empty()) options.watch_root_certs();  // else the system's roots
    if (!identity.empty()) options.watch_identity_key_cert_pairs();
  }
  if (tls.insecure_skip_verify) {
    options.set_verify_server_certs(false);
    options.set_certificate_verifier(
        std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    options.set_check_call_host(false);
  }
  auto credentials = grpc::experimental::TlsCredentials(options);
  if (!credentials) return Status::FailedPrecondition("gRPC refused the TLS channel credentials");
  return credentials;
}

}  // namespace epoch::client
