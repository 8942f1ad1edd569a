#include "epoch/rpc/client_peers.h"

#include <utility>

namespace epoch::server::rpc {

void ClientPeers::RecordFd(int fd, std::string client) {
  Record("fd:" + std::to_string(fd), std::move(client));
}

void ClientPeers::Record(std::string grpc_peer, std::string client) {
  std::lock_guard lock(mu_);
  clients_[std::move(grpc_peer)] = std::move(client);
}

void ClientPeers::Forget(const std::string& grpc_peer) {
  std::lock_guard lock(mu_);
  clients_.erase(grpc_peer);
}

std::string ClientPeers::Resolve(std::string_view grpc_peer) const {
  std::lock_guard lock(mu_);
  auto it = clients_.find(std::string(grpc_peer));
  return it == clients_.end() ? std::string(grpc_peer) : it->second;
}

std::size_t ClientPeers::size() const {
  std::lock_guard lock(mu_);
  return clients_.size();
}

}  // namespace epoch::server::rpc
