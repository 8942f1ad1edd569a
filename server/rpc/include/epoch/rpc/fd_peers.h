// FdPeers: the remote address of each client connection handed to gRPC by descriptor.
//
// gRPC names a connection it was given with grpc::AddInsecureChannelFromFd "fd:<n>" in
// ServerContext::peer() (grpc_server_add_channel_from_fd), not by its remote address. Every
// connection of one client then looks like another client to the per-address limits
// (--max-keepalive-streams-per-address, the Authenticate failure limiter): a client with 20
// connections held 20 × 256 keep-alive streams. ClientPortMux records each descriptor's remote
// address before it hands the descriptor over, and the services read peer() through Resolve.
//
// Entries are never removed: a descriptor number names one open connection at a time, and the mux
// records every hand-over, so the entry a closed connection left is replaced before its number
// names another gRPC connection. The table holds at most one entry per descriptor number.
//
// Thread-safety: any thread.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace epoch::server::rpc {

class FdPeers {
 public:
  // `peer` in gRPC's form: "ipv4:127.0.0.1:5000", "ipv6:[::1]:5000".
  void Record(int fd, std::string peer);
  // The peer recorded for gRPC's "fd:<n>"; any other peer string (gRPC's own listeners name the
  // remote address), or a descriptor never recorded, unchanged.
  [[nodiscard]] std::string Resolve(std::string_view grpc_peer) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<int, std::string> peers_;  // guarded by mu_
};

}  // namespace epoch::server::rpc
