// Certificates for process-level tests, made with the `openssl` CLI (Debian's openssl package):
// a self-signed CA and P-256 certificates it signs, as <dir>/<name>.pem and <dir>/<name>.key.
// Used by the peer mTLS integration tests and by chaos/'s --peer-tls clusters.
//
// Threading: plain functions; calls writing the same files must not overlap.
#pragma once

#include <string>
#include <vector>

#include "epoch/status.h"

namespace epoch::test {

// A self-signed CA: <dir>/<name>.pem and <dir>/<name>.key, valid two days.
[[nodiscard]] Status MakeTestCa(const std::string& dir, const std::string& name);
// <dir>/<file>.pem and <dir>/<file>.key: CN `cn`, SAN DNS `cn` and IP 127.0.0.1, signed by the CA
// <dir>/<ca>.pem, valid two days.
[[nodiscard]] Status IssueTestCertificate(const std::string& dir, const std::string& file,
                                          const std::string& cn, const std::string& ca = "ca");
// The peer mTLS flags of a member presenting <dir>/<cert_of>.pem and trusting <dir>/<ca>.pem
// (--peer-client-cert-auth on).
[[nodiscard]] std::vector<std::string> PeerTlsFlags(const std::string& dir,
                                                    const std::string& cert_of,
                                                    const std::string& ca = "ca");

}  // namespace epoch::test
