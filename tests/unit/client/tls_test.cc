#include "epoch/client/tls.h"

#include <catch2/catch.hpp>

#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"

namespace epoch::client {
namespace {

TEST_CASE("TLS is on as etcdctl decides: a flag, a file or an https endpoint", "[client][tls]") {
  TlsOptions none;
  CHECK_FALSE(none.Enabled({"127.0.0.1:2379", "http://127.0.0.1:2389"}));
  CHECK(none.Enabled({"127.0.0.1:2379", "https://127.0.0.1:2389"}));
  TlsOptions on;
  on.enabled = true;
  CHECK(on.Enabled({"127.0.0.1:2379"}));
  TlsOptions ca;
  ca.ca_file = "/ca.pem";
  CHECK(ca.Enabled({"127.0.0.1:2379"}));
  TlsOptions cert;
  cert.cert_file = "/c.pem";
  CHECK(cert.Enabled({"127.0.0.1:2379"}));
  // Skipping verification alone does not turn TLS on (etcdctl: it applies to a TLS config).
  TlsOptions skip;
  skip.insecure_skip_verify = true;
  CHECK_FALSE(skip.Enabled({"127.0.0.1:2379"}));
}

TEST_CASE("TLS credentials name the file that cannot be used", "[client][tls]") {
  test_support::TempDir dir("epoch-client-tls");
  const std::string garbage = dir.path() + "/garbage.pem";
  test_support::WriteFile(garbage, "not pem\n");
  const std::vector<std::string> endpoints = {"127.0.0.1:2379"};

  TlsOptions missing;
  missing.ca_file = dir.path() + "/missing.pem";
  auto r = ChannelCredentials(missing, endpoints);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("missing.pem") != std::string::npos);

  TlsOptions not_pem;
  not_pem.ca_file = garbage;
  r = ChannelCredentials(not_pem, endpoints);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("no PEM data") != std::string::npos);

  TlsOptions half;
  half.cert_file = garbage;
  r = ChannelCredentials(half, endpoints);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("both the cert and the key") != std::string::npos);

  CHECK(ChannelCredentials(TlsOptions{}, endpoints).ok());
  TlsOptions system_roots;
  system_roots.enabled = true;
  CHECK(ChannelCredentials(system_roots, endpoints).ok());
}

}  // namespace
}  // namespace epoch::client
