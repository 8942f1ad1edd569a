#include "epoch/test_support/test_pki.h"

#include <fmt/format.h>

#include <stdexcept>

#include "epoch/test_support/files.h"
#include "epoch/test_support/process.h"

namespace epoch::test {
namespace {

std::string Path(const std::string& dir, const std::string& file, const char* ext) {
  return fmt::format("{}/{}.{}", dir, file, ext);
}

Status Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = RunCommand(argv, {}, std::chrono::seconds(60));
  if (r.exit_code == 0) return Status::Ok();
  return Status::IOError(fmt::format("openssl {}: {}", fmt::join(args, " "), r.Describe()));
}

}  // namespace

Status MakeTestCa(const std::string& dir, const std::string& name) {
  return Openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", Path(dir, name, "key"), "-out", Path(dir, name, "pem"), "-days", "2",
                  "-subj", fmt::format("/CN=epoch-test-{}", name)});
}

Status IssueTestCertificate(const std::string& dir, const std::string& file, const std::string& cn,
                            const std::string& ca) {
  const std::string ext = Path(dir, file, "ext");
  try {
    test_support::WriteFile(ext, fmt::format("subjectAltName=DNS:{},IP:127.0.0.1\n", cn));
  } catch (const std::runtime_error& e) {
    return Status::IOError(e.what());
  }
  EPOCH_RETURN_IF_ERROR(Openssl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                 "-nodes", "-keyout", Path(dir, file, "key"), "-out",
                                 Path(dir, file, "csr"), "-subj", fmt::format("/CN={}", cn)}));
  return Openssl({"x509", "-req", "-in", Path(dir, file, "csr"), "-CA", Path(dir, ca, "pem"),
                  "-CAkey", Path(dir, ca, "key"), "-CAcreateserial", "-out", Path(dir, file, "pem"),
                  "-days", "2", "-extfile", ext});
}

std::vector<std::string> PeerTlsFlags(const std::string& dir, const std::string& cert_of,
                                      const std::string& ca) {
  return {"--peer-cert-file",        Path(dir, cert_of, "pem"), "--peer-key-file",
          Path(dir, cert_of, "key"), "--peer-trusted-ca-file",  Path(dir, ca, "pem"),
          "--peer-client-cert-auth"};
}

}  // namespace epoch::test
