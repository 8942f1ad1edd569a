// The address of the client behind a gRPC call. An https:// client port's connections reach
// gRPC through daemon/'s TLS relay (ClientPortMux), so gRPC's ServerContext::peer() names the
// relay's loopback socket, not the client. The relay records each of its sockets here with the
// client's address for as long as the connection lives, and ClientAddress() answers with the
// client's: per-address limits (keep-alive streams, failed-login back-off) and logs see the
// client, as on a plaintext port.
//
// Addresses are gRPC's peer strings ("ipv4:10.0.0.7:51234", "ipv6:[::1]:51234").
// Threading: any thread; one process-wide table (a socket's loopback port is unique while it is
// open, whichever node of the process relays it).
#pragma once

#include <grpcpp/server_context.h>

#include <string>

namespace epoch::server::rpc {

// Records that gRPC's peer `relay_peer` is the relay socket of a client at `client_peer`.
void RecordRelayedPeer(const std::string& relay_peer, std::string client_peer);
// Forgets it (the relayed connection closed).
void ForgetRelayedPeer(const std::string& relay_peer);
// `grpc_peer` itself, or the client it relays for.
[[nodiscard]] std::string ClientAddress(const std::string& grpc_peer);
[[nodiscard]] inline std::string ClientAddress(const grpc::ServerContext& ctx) {
  return ClientAddress(ctx.peer());
}
// Relayed connections open now (for tests and metrics).
[[nodiscard]] std::size_t RelayedPeerCount();

}  // namespace epoch::server::rpc
