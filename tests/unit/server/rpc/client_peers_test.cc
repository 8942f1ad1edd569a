// rpc::ClientPeers (server/rpc/include/epoch/rpc/client_peers.h): gRPC's "fd:<n>" and TLS relay
// peers named by the remote address ClientPortMux and the relays recorded, so per-address limits
// count a client, not a connection.
#include "epoch/rpc/client_peers.h"

#include <catch2/catch.hpp>

#include "epoch/stream_slots.h"

namespace epoch::server::rpc {
namespace {

TEST_CASE("a descriptor's peer is the address recorded for it", "[server][rpc]") {
  ClientPeers peers;
  peers.RecordFd(17, "ipv4:10.0.0.5:40001");
  peers.RecordFd(18, "ipv4:10.0.0.5:40002");
  CHECK(peers.Resolve("fd:17") == "ipv4:10.0.0.5:40001");
  // Two connections of one client are one address to StreamSlots.
  CHECK(StreamSlots::AddressOf(peers.Resolve("fd:17")) ==
        StreamSlots::AddressOf(peers.Resolve("fd:18")));
  CHECK(StreamSlots::AddressOf("fd:17") != StreamSlots::AddressOf("fd:18"));

  // A descriptor number reused by a later connection names the later client.
  peers.RecordFd(17, "ipv6:[::1]:5000");
  CHECK(peers.Resolve("fd:17") == "ipv6:[::1]:5000");

  // gRPC's own listeners name the address already; unknown or malformed descriptors stay as they
  // are (each is then its own address, as before).
  CHECK(peers.Resolve("ipv4:127.0.0.1:5000") == "ipv4:127.0.0.1:5000");
  CHECK(peers.Resolve("fd:99") == "fd:99");
  CHECK(peers.Resolve("fd:17x") == "fd:17x");
  CHECK(peers.Resolve("fd:") == "fd:");
}

TEST_CASE("a TLS relay's socket names its client until the relay is forgotten", "[server][rpc]") {
  ClientPeers peers;
  peers.Record("ipv4:127.0.0.1:41000", "ipv4:10.0.0.9:5555");
  CHECK(peers.Resolve("ipv4:127.0.0.1:41000") == "ipv4:10.0.0.9:5555");
  CHECK(peers.size() == 1);
  peers.Forget("ipv4:127.0.0.1:41000");
  CHECK(peers.Resolve("ipv4:127.0.0.1:41000") == "ipv4:127.0.0.1:41000");
  CHECK(peers.size() == 0);
}

}  // namespace
}  // namespace epoch::server::rpc
