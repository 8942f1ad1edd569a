// CountTlsHandshakeFailures (tls.h): gRPC's log function, counting the failed TLS handshakes its
// TLS layer reports and printing every line as gRPC's default log function does.
#include <fmt/chrono.h>
#include <fmt/format.h>
#include <grpc/support/log.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "epoch/rpc/tls.h"

namespace epoch::server::rpc {
namespace {

// What gRPC 1.51's TLS layer (src/core/tsi/ssl_transport_security.cc) logs, at ERROR, for every
// handshake that fails: "Handshake failed with fatal error SSL_ERROR_SSL: error:...".
constexpr std::string_view kHandshakeFailed = "Handshake failed with fatal error";

std::atomic<std::uint64_t> handshake_failures{0};

char SeverityLetter(gpr_log_severity severity) {
  switch (severity) {
    case GPR_LOG_SEVERITY_DEBUG: return 'D';
    case GPR_LOG_SEVERITY_INFO: return 'I';
    case GPR_LOG_SEVERITY_ERROR: return 'E';
  }
  return '?';
}

void LogAndCount(gpr_log_func_args* args) {
  const std::string_view message = args->message != nullptr ? args->message : "";
  if (message.substr(0, kHandshakeFailed.size()) == kHandshakeFailed) {
    handshake_failures.fetch_add(1, std::memory_order_relaxed);
  }
  // gRPC's own format: severity, date and time, thread, file:line, message.
  const char* file = args->file != nullptr ? args->file : "";
  const char* slash = std::strrchr(file, '/');
  const auto now = std::chrono::system_clock::now();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1'000'000;
  const std::string line =
      fmt::format("{}{:%m%d %H:%M:%S}.{:06} {:7} {}:{}] {}\n", SeverityLetter(args->severity),
                  fmt::localtime(std::chrono::system_clock::to_time_t(now)), micros,
                  static_cast<long>(::syscall(SYS_gettid)), slash != nullptr ? slash + 1 : file,
                  args->line, message);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace

void CountTlsHandshakeFailures() {
  static std::once_flag installed;
  std::call_once(installed, [] { gpr_set_log_function(LogAndCount); });
}

std::uint64_t TlsHandshakeFailures() { return handshake_failures.load(std::memory_order_relaxed); }

}  // namespace epoch::server::rpc
