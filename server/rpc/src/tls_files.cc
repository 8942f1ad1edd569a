// The OpenSSL half of tls.h: loading and checking PEM files, and the --auto-tls certificate.
#include <fmt/format.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "epoch/rpc/tls.h"

namespace epoch::server::rpc {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The oldest error on OpenSSL's queue, as text, and the queue cleared.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM data found";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof(buf));
  return buf;
}

Result<BioPtr> OpenFile(const std::string& path, const std::string& flag) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    return Status::InvalidArgument(fmt::format("{} {}: cannot open the file", flag, path));
  }
  return bio;
}

// Every certificate in a PEM file; at least one.
Result<std::vector<X509Ptr>> ReadCertificates(const std::string& path, const std::string& flag) {
  Result<BioPtr> bio = OpenFile(path, flag);
  if (!bio.ok()) return bio.status();
  std::vector<X509Ptr> certs;
  while (X509* x = PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr)) certs.emplace_back(x);
  // Reading past the last certificate leaves "no start line" on the queue: the normal end.
  const std::string tail_error = certs.empty() ? OpenSslError() : (ERR_clear_error(), "");
  if (certs.empty()) {
    return Status::InvalidArgument(
        fmt::format("{} {}: no PEM certificate could be read ({})", flag, path, tail_error));
  }
  return certs;
}

Status CheckFile(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Status::InvalidArgument(fmt::format("{} {}: no such file", flag, path));
  }
  return Status::Ok();
}

}  // namespace

Status CheckTlsFiles(const TlsFiles& files, std::string_view flag_prefix) {
  const std::string cert_flag = fmt::format("{}cert-file", flag_prefix);
  const std::string key_flag = fmt::format("{}key-file", flag_prefix);
  const std::string ca_flag = fmt::format("{}trusted-ca-file", flag_prefix);
  if (files.cert_file.empty()) return Status::InvalidArgument(cert_flag + " is required for TLS");
  if (files.key_file.empty()) return Status::InvalidArgument(key_flag + " is required for TLS");
  EPOCH_RETURN_IF_ERROR(CheckFile(files.cert_file, cert_flag));
  EPOCH_RETURN_IF_ERROR(CheckFile(files.key_file, key_flag));
  Result<std::vector<X509Ptr>> chain = ReadCertificates(files.cert_file, cert_flag);
  if (!chain.ok()) return chain.status();
  Result<BioPtr> key_bio = OpenFile(files.key_file, key_flag);
  if (!key_bio.ok()) return key_bio.status();
  PkeyPtr key(PEM_read_bio_PrivateKey(key_bio->get(), nullptr, nullptr, nullptr));
  if (!key) {
    return Status::InvalidArgument(fmt::format("{} {}: no PEM private key could be read ({})",
                                               key_flag, files.key_file, OpenSslError()));
  }
  if (X509_check_private_key(chain->front().get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(fmt::format("{} {} does not match the certificate of {} {}",
                                               key_flag, files.key_file, cert_flag,
                                               files.cert_file));
  }
  if (!files.trusted_ca_file.empty()) {
    EPOCH_RETURN_IF_ERROR(CheckFile(files.trusted_ca_file, ca_flag));
    Result<std::vector<X509Ptr>> cas = ReadCertificates(files.trusted_ca_file, ca_flag);
    if (!cas.ok()) return cas.status();
  }
  return Status::Ok();
}

namespace {

Status AddExtension(X509* cert, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return Status::FailedPrecondition("--auto-tls: extension: " + OpenSslError());
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (added != 1) return Status::FailedPrecondition("--auto-tls: extension: " + OpenSslError());
  return Status::Ok();
}

std::string SubjectAltNames(const std::vector<std::string>& hosts) {
  std::string out;
  for (const std::string& h : hosts) {
    const bool ip = !h.empty() && (h.find(':') != std::string::npos ||
                                   h.find_first_not_of("0123456789.") == std::string::npos);
    out += fmt::format("{}{}:{}", out.empty() ? "" : ",", ip ? "IP" : "DNS", h);
  }
  return out;
}

Result<X509Ptr> SelfSign(EVP_PKEY* key, const std::vector<std::string>& hosts) {
  X509Ptr cert(X509_new());
  if (!cert) return Status::FailedPrecondition("--auto-tls: " + OpenSslError());
  X509_set_version(cert.get(), X509_VERSION_3);
  // A random 127-bit serial, as RFC 5280 asks (positive, at most 20 bytes).
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) == nullptr) {
    return Status::FailedPrecondition("--auto-tls: serial: " + OpenSslError());
  }
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 365L * 24 * 3600);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("epoch auto-tls"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(hosts.front().c_str()), -1, -1,
                             0);
  X509_set_issuer_name(cert.get(), name);
  X509_set_pubkey(cert.get(), key);
  EPOCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  EPOCH_RETURN_IF_ERROR(
      AddExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  EPOCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_ext_key_usage, "serverAuth,clientAuth"));
  EPOCH_RETURN_IF_ERROR(AddExtension(cert.get(), NID_subject_alt_name, SubjectAltNames(hosts)));
  if (X509_sign(cert.get(), key, EVP_sha256()) == 0) {
    return Status::FailedPrecondition("--auto-tls: signing: " + OpenSslError());
  }
  return cert;
}

// Writes through a BIO on a file created with `mode`.
Status WritePem(const std::string& path, mode_t mode, const std::function<int(BIO*)>& write) {
  const std::string tmp = path + ".tmp";
  std::FILE* file = std::fopen(tmp.c_str(), "w");
  if (file == nullptr) return Status::IOError(fmt::format("--auto-tls: cannot create {}", tmp));
  ::chmod(tmp.c_str(), mode);
  BioPtr bio(BIO_new_fp(file, BIO_CLOSE));
  if (!bio || write(bio.get()) != 1) {
    return Status::IOError(fmt::format("--auto-tls: cannot write {}: {}", tmp, OpenSslError()));
  }
  bio.reset();  // closes the file
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return Status::IOError(fmt::format("--auto-tls: cannot rename {}: {}", tmp, ec.message()));
  return Status::Ok();
}

}  // namespace

Result<TlsFiles> EnsureSelfSignedCertificate(const std::string& dir,
                                             const std::vector<std::string>& hosts) {
  TlsFiles files{dir + "/cert.pem", dir + "/key.pem", ""};
  std::error_code ec;
  if (std::filesystem::exists(files.cert_file, ec) && std::filesystem::exists(files.key_file, ec)) {
    return files;
  }
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Status::IOError(fmt::format("--auto-tls: cannot create {}: {}", dir, ec.message()));
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  if (hosts.empty()) return Status::InvalidArgument("--auto-tls: no host to name");
  PkeyPtr key(EVP_EC_gen("P-256"));
  if (!key) return Status::FailedPrecondition("--auto-tls: key generation: " + OpenSslError());
  Result<X509Ptr> cert = SelfSign(key.get(), hosts);
  if (!cert.ok()) return cert.status();
  EPOCH_RETURN_IF_ERROR(WritePem(files.key_file, 0600, [&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  }));
  EPOCH_RETURN_IF_ERROR(WritePem(files.cert_file, 0644,
                                 [&](BIO* bio) { return PEM_write_bio_X509(bio, cert->get()); }));
  return files;
}

}  // namespace epoch::server::rpc
