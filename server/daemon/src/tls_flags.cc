#include "tls_flags.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "epoch/rpc/tls.h"

namespace epoch::server {
namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// The hosts the --auto-tls certificate names: every client listener's (a wildcard listener is
// reached as localhost).
std::vector<std::string> AutoTlsHosts(const NodeConfig& config) {
  std::vector<std::string> hosts;
  auto add = [&hosts](const std::string& h) {
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  };
  std::vector<HostPort> listeners = {config.listen_client};
  listeners.insert(listeners.end(), config.listen_client_extra.begin(),
                   config.listen_client_extra.end());
  for (const HostPort& l : listeners) {
    if (l.host.empty() || l.host == "0.0.0.0" || l.host == "::" || l.host == "[::]") {
      add("localhost");
      add("127.0.0.1");
    } else {
      add(l.host.front() == '[' ? l.host.substr(1, l.host.size() - 2) : l.host);
    }
  }
  return hosts;
}

}  // namespace

void AddTlsFlags(CLI::App& app, TlsFlags& f, ClientTlsConfig& c) {
  app.add_option("--cert-file", c.server.files.cert_file,
                 "Certificate (PEM chain) of https:// client listeners; re-read when it changes");
  app.add_option("--key-file", c.server.files.key_file, "Private key of --cert-file (PEM)");
  app.add_option("--trusted-ca-file", c.server.files.trusted_ca_file,
                 "CA bundle (PEM) that client certificates must chain to");
  app.add_flag("--client-cert-auth", c.server.client_cert_auth,
               "Require a client certificate signed by --trusted-ca-file on https:// listeners");
  app.add_flag("--auto-tls", c.auto_tls,
               "https:// listeners without --cert-file use a generated self-signed certificate "
               "(<data-dir>/fixtures/client; for tests)");
  app.add_option("--cipher-suites", f.cipher_suites,
                 "Comma-separated TLS 1.2 cipher suites, etcd's names (default: gRPC's); TLS 1.3 "
                 "suites are fixed");
  app.add_option("--tls-min-version", f.tls_min_version,
                 "Minimum TLS version: TLS1.2 (gRPC negotiates TLS 1.2 or 1.3)");
}

Status FinishTlsFlags(const TlsFlags& f, const std::string& listen_client_urls,
                      ClientTlsConfig& c) {
  c.https.clear();
  std::string first_https;
  for (const std::string& url : SplitList(listen_client_urls)) {
    c.https.push_back(url.starts_with("https://"));
    if (c.https.back() && first_https.empty()) first_https = url;
  }
  const rpc::TlsFiles& files = c.server.files;
  if (files.cert_file.empty() != files.key_file.empty()) {
    return Status::InvalidArgument(files.cert_file.empty() ? "--key-file needs --cert-file"
                                                           : "--cert-file needs --key-file");
  }
  if (c.server.client_cert_auth && files.trusted_ca_file.empty()) {
    return Status::InvalidArgument("--client-cert-auth needs --trusted-ca-file");
  }
  if (!first_https.empty() && files.cert_file.empty() && !c.auto_tls) {
    return Status::InvalidArgument(fmt::format(
        "--listen-client-urls {}: https:// needs --cert-file and --key-file (or --auto-tls)",
        first_https));
  }
  if (first_https.empty() && (!files.cert_file.empty() || c.auto_tls)) {
    spdlog::warn("no --listen-client-urls entry is https://: the client TLS flags are ignored");
  }
  // Checked now, applied by ApplyTlsPolicy.
  return rpc::OpenSslCipherList(SplitList(f.cipher_suites), f.tls_min_version).status();
}

Status ApplyTlsPolicy(const TlsFlags& f) {
  return rpc::SetProcessTlsPolicy(SplitList(f.cipher_suites), f.tls_min_version);
}

Status PrepareClientTls(NodeConfig& config) {
  ClientTlsConfig& tls = config.client_tls;
  if (!tls.Any()) return Status::Ok();
  if (tls.auto_tls && tls.server.files.cert_file.empty()) {
    Result<rpc::TlsFiles> made = rpc::EnsureSelfSignedCertificate(
        config.data_dir + "/fixtures/client", AutoTlsHosts(config));
    if (!made.ok()) return made.status();
    made->trusted_ca_file = tls.server.files.trusted_ca_file;
    tls.server.files = *made;
  }
  return rpc::CheckTlsFiles(tls.server.files);
}

}  // namespace epoch::server
