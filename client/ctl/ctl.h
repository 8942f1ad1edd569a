// The shared state of one epochctl invocation: global flags, the Client (made on first use),
// the output format, the stop signal (SIGINT/SIGTERM) and the command's outcome. Every command
// module registers its subcommands with a Register* function (commands.h) and reports through
// Ctl::Finish.
//
// Threading: one Ctl per process, used from the main thread; stop() may be observed anywhere.
#pragma once

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "credentials.h"
#include "epoch/client/client.h"
#include "epoch/status.h"

namespace epoch::ctl {

enum class OutputFormat { kSimple, kJson, kTable, kFields, kProtobuf };

struct GlobalFlags {
  std::string endpoints;  // comma separated; default EPOCH_ENDPOINTS, then 127.0.0.1:2379
  std::string dial_timeout = "2s";
  std::string command_timeout = "5s";
  std::string write_out = "simple";
  // etcdctl's TLS flags: --cacert, --cert, --key, --insecure-skip-tls-verify and
  // --insecure-transport (true: plaintext unless a file is given or an endpoint is https://).
  std::string cacert;
  std::string cert;
  std::string key;
  bool insecure_skip_tls_verify = false;
  bool insecure_transport = true;
  // etcdctl's --user name[:password] and --password (credentials.h).
  std::string user;
  std::string password;
};

// etcdctl's exit statuses (etcdctl/ctlv3/command/error.go).
inline constexpr int kExitInvalidInput = 3;
inline constexpr int kExitBadFeature = 4;
inline constexpr int kExitBadArgs = 128;

class Ctl {
 public:
  Ctl(std::ostream& out, std::stop_token stop) : out_(out), stop_(std::move(stop)) {}

  GlobalFlags flags;

  // Validates the global flags (once); every command runs it first (commands.h Runner).
  Status Prepare();
  // Creates the client for --endpoints (on first use).
  Result<client::Client*> GetClient();
  // A separate client for exactly these endpoints (endpoint status/health ask each one alone).
  Result<std::unique_ptr<client::Client>> ClientFor(std::vector<std::string> endpoints);
  [[nodiscard]] std::vector<std::string> Endpoints() const;
  // --command-timeout and the stop signal.
  [[nodiscard]] client::CallOptions Call() const;
  [[nodiscard]] client::CallOptions CallWithoutTimeout() const;
  [[nodiscard]] Result<std::chrono::milliseconds> CommandTimeout() const;
  [[nodiscard]] OutputFormat format() const;
  [[nodiscard]] std::ostream& out() { return out_; }
  [[nodiscard]] const std::stop_token& stop() const { return stop_; }

  // Records the outcome of the command that ran (the first error wins). An error made by
  // BadFeature exits with etcdctl's ExitBadFeature (4) rather than `exit_code`.
  void Finish(Status status, int exit_code = 1);
  // etcdctl's refusal of a feature the command does not have (an output format): an error with
  // `message` that ends the command with exit code 4, as etcdctl's ExitBadFeature.
  [[nodiscard]] Status BadFeature(std::string message);
  // Exit with `exit_code` without an error line (lock: the child's own exit status).
  void ExitWith(int exit_code);
  [[nodiscard]] bool silent() const { return silent_; }
  [[nodiscard]] const Status& status() const { return status_; }
  [[nodiscard]] int exit_code() const { return status_.ok() ? 0 : exit_code_; }

 private:
  std::ostream& out_;
  std::stop_token stop_;
  bool validated_ = false;
  std::chrono::milliseconds dial_timeout_{2000};
  std::chrono::milliseconds command_timeout_{5000};
  OutputFormat format_ = OutputFormat::kSimple;
  std::unique_ptr<client::Client> client_;
  std::optional<Credentials> credentials_;  // resolved (and asked for) once
  Status status_;
  int exit_code_ = 1;
  bool silent_ = false;
  bool bad_feature_ = false;  // an error BadFeature made is pending
};

// "2s", "500ms", "1m", "1.5s", "100us"-less: ns/us/ms/s/m/h; a bare number is seconds.
Result<std::chrono::milliseconds> ParseDuration(const std::string& text);
// Lease IDs and member IDs are hexadecimal on the command line (etcdctl).
Result<std::int64_t> ParseHexId(const std::string& text, const char* what);
// The one line epochctl prints after "Error: ": the server's etcd message when there is one.
std::string ErrorLine(const Status& status);

}  // namespace epoch::ctl
