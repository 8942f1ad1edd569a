#include "epoch/rpc/fd_peers.h"

#include <charconv>
#include <utility>

namespace epoch::server::rpc {

void FdPeers::Record(int fd, std::string peer) {
  std::lock_guard lock(mu_);
  peers_[fd] = std::move(peer);
}

std::string FdPeers::Resolve(std::string_view grpc_peer) const {
  constexpr std::string_view kPrefix = "fd:";
  if (!grpc_peer.starts_with(kPrefix)) return std::string(grpc_peer);
  const std::string_view digits = grpc_peer.substr(kPrefix.size());
  int fd = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::string(grpc_peer);
  std::lock_guard lock(mu_);
  auto it = peers_.find(fd);
  return it == peers_.end() ? std::string(grpc_peer) : it->second;
}

}  // namespace epoch::server::rpc
