#include "epoch/rpc/client_address.h"

#include <mutex>
#include <unordered_map>

namespace epoch::server::rpc {
namespace {

struct Table {
  std::mutex mu;
  std::unordered_map<std::string, std::string> clients;  // relay peer → client peer
};

Table& Relayed() {
  static Table* table = new Table();  // never destroyed: relays may close during exit
  return *table;
}

}  // namespace

void RecordRelayedPeer(const std::string& relay_peer, std::string client_peer) {
  Table& t = Relayed();
  std::lock_guard lock(t.mu);
  t.clients[relay_peer] = std::move(client_peer);
}

void ForgetRelayedPeer(const std::string& relay_peer) {
  Table& t = Relayed();
  std::lock_guard lock(t.mu);
  t.clients.erase(relay_peer);
}

std::string ClientAddress(const std::string& grpc_peer) {
  Table& t = Relayed();
  std::lock_guard lock(t.mu);
  auto found = t.clients.find(grpc_peer);
  return found == t.clients.end() ? grpc_peer : found->second;
}

std::size_t RelayedPeerCount() {
  Table& t = Relayed();
  std::lock_guard lock(t.mu);
  return t.clients.size();
}

}  // namespace epoch::server::rpc
