// ClientPeers: the client behind each client-port connection that gRPC does not know by the
// client's address, so that per-address limits (--max-keepalive-streams-per-address, the
// Authenticate failure limiter) and logs count a client, not a connection:
//
//   - a plaintext connection ClientPortMux hands over by descriptor
//     (grpc::AddInsecureChannelFromFd): gRPC's ServerContext::peer() says "fd:<n>" (RecordFd);
//   - an https:// connection relayed to gRPC's loopback TLS listener (daemon/'s TlsRelays):
//     peer() names the relay's socket, "ipv4:127.0.0.1:<port>" (Record while the relay is open,
//     Forget when it closes).
//
// A descriptor's entry is never removed: a descriptor number names one open connection at a
// time, and the mux records every hand-over, so the entry a closed connection left is replaced
// before its number names another gRPC connection. The table holds at most one entry per
// descriptor number and one per open relay.
//
// Thread-safety: any thread.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace epoch::server::rpc {

class ClientPeers {
 public:
  // `client` in gRPC's form: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000".
  void RecordFd(int fd, std::string client);
  // gRPC's peer `grpc_peer` is a relay of `client`, until Forget(grpc_peer).
  void Record(std::string grpc_peer, std::string client);
  void Forget(const std::string& grpc_peer);
  // The client recorded for gRPC's peer string; any other peer (gRPC's own listeners name the
  // remote address) unchanged.
  [[nodiscard]] std::string Resolve(std::string_view grpc_peer) const;
  [[nodiscard]] std::size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::string> clients_;  // gRPC's peer → client; guarded by mu_
};

}  // namespace epoch::server::rpc
