// CountTlsHandshakeFailures: the error line gRPC's TLS layer logs for a failed handshake is
// counted, other gRPC log lines are not (real refused handshakes: integration_tests "[tls]").
#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include <catch2/catch.hpp>

#include "epoch/rpc/tls.h"

namespace epoch::server::rpc {
namespace {

TEST_CASE("gRPC's failed-handshake log lines are counted, other lines are not", "[tls]") {
  grpc_init();  // gRPC logs nothing before it is initialised (epochd's servers initialise it)
  CountTlsHandshakeFailures();
  CountTlsHandshakeFailures();  // installing twice changes nothing
  const std::uint64_t before = TlsHandshakeFailures();
  // As src/core/tsi/ssl_transport_security.cc logs it.
  gpr_log(GPR_ERROR, "Handshake failed with fatal error %s: %s.", "SSL_ERROR_SSL",
          "error:0A00010B:SSL routines::wrong version number");
  CHECK(TlsHandshakeFailures() == before + 1);
  gpr_log(GPR_ERROR, "%s", "an unrelated error");
  gpr_log(GPR_ERROR, "%s", "Security handshake failed: already counted by the line above");
  CHECK(TlsHandshakeFailures() == before + 1);
  grpc_shutdown();
}

}  // namespace
}  // namespace epoch::server::rpc
