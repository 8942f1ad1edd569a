#include "epoch/peer/peer_tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <utility>

namespace epoch::server {
namespace {

constexpr long kAutoTlsValidSeconds = 365L * 24 * 3600;

void UseModernProtocols(asio::ssl::context& ctx) {
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                  asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                  asio::ssl::context::no_tlsv1_1);
  // No TLS 1.3 session tickets: the dialling side never reads after its handshake, so a ticket
  // would sit in its socket and look like the peer closing it (PeerTransport's close-watch).
  SSL_CTX_set_num_tickets(ctx.native_handle(), 0);
  SSL_CTX_set_options(ctx.native_handle(), SSL_OP_NO_TICKET);
}

Status FlagError(std::string_view flag, std::string_view value, const std::error_code& ec) {
  return Status::InvalidArgument(fmt::format("{} {}: cannot load: {}", flag, value, ec.message()));
}

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<std::size_t>(n)) : std::string();
}

bool AddSubjectAltName(X509* cert, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, value.c_str());
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

}  // namespace

PeerTls::PeerTls(PeerTlsOptions options)
    : options_(std::move(options)),
      server_(asio::ssl::context::tls_server),
      client_(asio::ssl::context::tls_client) {}

Result<std::shared_ptr<PeerTls>> PeerTls::Create(const PeerTlsOptions& options) {
  if (!options.enabled()) return Status::InvalidArgument("peer TLS is not configured");
  std::shared_ptr<PeerTls> tls(new PeerTls(options));
  EPOCH_RETURN_IF_ERROR(tls->Configure());
  return tls;
}

Status PeerTls::Configure() {
  UseModernProtocols(server_);
  UseModernProtocols(client_);
  std::error_code ec;
  if (!options_.cert_file.empty()) {
    for (asio::ssl::context* ctx : {&server_, &client_}) {
      ctx->use_certificate_chain_file(options_.cert_file, ec);
      if (ec) return FlagError("--peer-cert-file", options_.cert_file, ec);
      ctx->use_private_key_file(options_.key_file, asio::ssl::context::pem, ec);
      if (ec) return FlagError("--peer-key-file", options_.key_file, ec);
    }
  } else {
    Result<PemKeyPair> pair = MakeSelfSignedCertificate(options_.self_name);
    if (!pair.ok()) return pair.status().Annotate("--peer-auto-tls");
    for (asio::ssl::context* ctx : {&server_, &client_}) {
      ctx->use_certificate(asio::buffer(pair->cert_pem), asio::ssl::context::pem, ec);
      if (!ec) ctx->use_private_key(asio::buffer(pair->key_pem), asio::ssl::context::pem, ec);
      if (ec) return FlagError("--peer-auto-tls", "certificate", ec);
    }
  }
  if (verifies_peers()) {
    for (asio::ssl::context* ctx : {&server_, &client_}) {
      ctx->load_verify_file(options_.trusted_ca_file, ec);
      if (ec) return FlagError("--peer-trusted-ca-file", options_.trusted_ca_file, ec);
    }
    client_.set_verify_mode(asio::ssl::verify_peer, ec);
  } else {
    client_.set_verify_mode(asio::ssl::verify_none, ec);  // --peer-auto-tls: encryption only
  }
  server_.set_verify_mode(options_.client_cert_auth
                              ? asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert
                              : asio::ssl::verify_none,
                          ec);
  if (ec) return Status::InvalidArgument(fmt::format("peer TLS: {}", ec.message()));
  return Status::Ok();
}

bool PeerTls::ClientAllowed(X509* cert) const {
  if (options_.allowed_cn.empty() && options_.allowed_hostname.empty()) return true;
  return CertificateAllowed(cert, options_.allowed_cn, options_.allowed_hostname);
}

std::vector<std::string> CertificateNames(X509* cert) {
  std::vector<std::string> names;
  if (cert == nullptr) return names;
  X509_NAME* subject = X509_get_subject_name(cert);
  const int cn = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (cn >= 0) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, cn));
    names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(data)),
                       static_cast<std::size_t>(ASN1_STRING_length(data)));
  }
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(sans, i);
      if (name->type != GEN_DNS) continue;
      const ASN1_STRING* dns = name->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                         static_cast<std::size_t>(ASN1_STRING_length(dns)));
    }
    GENERAL_NAMES_free(sans);
  }
  return names;
}

bool CertificateNamesMember(X509* cert, std::string_view member_name) {
  if (cert == nullptr || member_name.empty()) return false;
  for (const std::string& name : CertificateNames(cert)) {
    if (name == member_name) return true;
  }
  return false;
}

bool CertificateAllowed(X509* cert, std::string_view allowed_cn,
                        std::string_view allowed_hostname) {
  if (cert == nullptr) return allowed_cn.empty() && allowed_hostname.empty();
  if (!allowed_cn.empty()) {
    std::vector<std::string> names = CertificateNames(cert);
    X509_NAME* subject = X509_get_subject_name(cert);
    if (X509_NAME_get_index_by_NID(subject, NID_commonName, -1) < 0 || names.front() != allowed_cn)
      return false;
  }
  if (!allowed_hostname.empty() &&
      X509_check_host(cert, allowed_hostname.data(), allowed_hostname.size(), 0, nullptr) != 1) {
    return false;
  }
  return true;
}

Result<PemKeyPair> MakeSelfSignedCertificate(std::string_view name) {
  const std::string cn = name.empty() ? std::string("epoch-peer") : std::string(name);
  std::unique_ptr<EVP_PKEY, PkeyDeleter> key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  if (!key || !cert) return Status::IOError("cannot make a key pair");
  X509_set_version(cert.get(), 2);
  std::uint64_t serial = 0;
  // A random serial: two auto-tls certificates of one issuer name never share one.
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof serial) != 1)
    return Status::IOError("no randomness for a certificate serial");
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), kAutoTlsValidSeconds);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert.get(), subject);
  X509_set_pubkey(cert.get(), key.get());
  if (!AddSubjectAltName(cert.get(), fmt::format("DNS:{},DNS:localhost,IP:127.0.0.1", cn)) ||
      X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return Status::IOError(fmt::format("cannot make a certificate for '{}'", cn));
  }
  std::unique_ptr<BIO, BioDeleter> cert_bio(BIO_new(BIO_s_mem()));
  std::unique_ptr<BIO, BioDeleter> key_bio(BIO_new(BIO_s_mem()));
  if (!cert_bio || !key_bio || PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
    return Status::IOError("cannot encode the certificate");
  }
  return PemKeyPair{BioText(cert_bio.get()), BioText(key_bio.get())};
}

X509Ptr ParseCertificatePem(std::string_view pem) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return nullptr;
  return X509Ptr(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

}  // namespace epoch::server
