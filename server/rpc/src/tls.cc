// The gRPC half of tls.h: credentials over gRPC's file-watching certificate provider, and the
// process-wide cipher policy.
#include "epoch/rpc/tls.h"

#include <fmt/format.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <array>
#include <cstdlib>
#include <utility>

namespace epoch::server::rpc {
namespace {

std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> Provider(
    const ServerTlsOptions& options) {
  return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      options.files.key_file, options.files.cert_file, options.files.trusted_ca_file,
      static_cast<unsigned>(options.refresh_interval.count()));
}

// etcd's (Go's) names of the TLS 1.2 suites OpenSSL 3 offers, and OpenSSL's names for them.
constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kCipherNames = {{
    {"TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"},
    {"TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"},
    {"TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256"},
    {"TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"},
    {"TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"},
    {"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"},
}};

}  // namespace

Result<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsOptions& options) {
  EPOCH_RETURN_IF_ERROR(CheckTlsFiles(options.files));
  if (options.client_cert_auth && options.files.trusted_ca_file.empty()) {
    return Status::InvalidArgument("--client-cert-auth needs --trusted-ca-file");
  }
  grpc::experimental::TlsServerCredentialsOptions tls(Provider(options));
  tls.watch_identity_key_cert_pairs();
  if (!options.files.trusted_ca_file.empty()) tls.watch_root_certs();
  tls.set_cert_request_type(options.client_cert_auth
                                ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  auto credentials = grpc::experimental::TlsServerCredentials(tls);
  if (!credentials) return Status::FailedPrecondition("gRPC refused the TLS server credentials");
  return credentials;
}

Result<std::shared_ptr<grpc::ChannelCredentials>> MakeMemberChannelCredentials(
    const ServerTlsOptions& options) {
  EPOCH_RETURN_IF_ERROR(CheckTlsFiles(options.files));
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_certificate_provider(Provider(options));
  tls.watch_identity_key_cert_pairs();
  if (!options.files.trusted_ca_file.empty()) {
    tls.watch_root_certs();
  } else {
    tls.set_verify_server_certs(false);
    tls.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    tls.set_check_call_host(false);
  }
  auto credentials = grpc::experimental::TlsCredentials(tls);
  if (!credentials) return Status::FailedPrecondition("gRPC refused the TLS channel credentials");
  return credentials;
}

std::string OpenSslCipherName(std::string_view go_name) {
  for (const auto& [go, openssl] : kCipherNames) {
    if (go == go_name) return std::string(openssl);
  }
  return "";
}

Result<std::string> OpenSslCipherList(const std::vector<std::string>& cipher_suites,
                                      std::string_view min_version) {
  if (!min_version.empty() && min_version != "TLS1.2") {
    if (min_version == "TLS1.0" || min_version == "TLS1.1" || min_version == "TLS1.3") {
      return Status::InvalidArgument(fmt::format(
          "--tls-min-version {}: not supported; gRPC's TLS negotiates TLS 1.2 or 1.3 and its "
          "floor cannot be moved (TLS1.2 is the minimum in force)",
          min_version));
    }
    return Status::InvalidArgument(fmt::format(
        "--tls-min-version {}: unknown (TLS1.0, TLS1.1, TLS1.2 or TLS1.3)", min_version));
  }
  std::string list;
  for (const std::string& name : cipher_suites) {
    const std::string openssl = OpenSslCipherName(name);
    if (openssl.empty()) {
      return Status::InvalidArgument(fmt::format(
          "--cipher-suites: '{}' is not a TLS 1.2 cipher suite this build offers", name));
    }
    list += (list.empty() ? "" : ":") + openssl;
  }
  return list;
}

Status SetProcessTlsPolicy(const std::vector<std::string>& cipher_suites,
                           std::string_view min_version) {
  Result<std::string> list = OpenSslCipherList(cipher_suites, min_version);
  if (!list.ok()) return list.status();
  if (list->empty()) return Status::Ok();
  // gRPC reads this once, when the first TLS credentials are created.
  if (::setenv("GRPC_SSL_CIPHER_SUITES", list->c_str(), 1) != 0) {
    return Status::FailedPrecondition("--cipher-suites: cannot set GRPC_SSL_CIPHER_SUITES");
  }
  return Status::Ok();
}

}  // namespace epoch::server::rpc
