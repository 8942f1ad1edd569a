// StreamSlots: the per-address and member-wide caps on open streams, release on slot destruction,
// the refusal counters, and the address taken from gRPC's peer strings.
#include "epoch/stream_slots.h"

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

namespace epoch {
namespace {

using Refusal = StreamSlots::Refusal;

TEST_CASE("stream slots: the address of a gRPC peer is its host without the port", "[rpc]") {
  CHECK(StreamSlots::AddressOf("ipv4:10.0.0.1:5000") == "10.0.0.1");
  CHECK(StreamSlots::AddressOf("ipv6:[::1]:5000") == "[::1]");
  CHECK(StreamSlots::AddressOf("ipv6:[fe80::1%25eth0]:2379") == "[fe80::1%25eth0]");
  CHECK(StreamSlots::AddressOf("unix:/run/epoch.sock") == "unix:/run/epoch.sock");
  CHECK(StreamSlots::AddressOf("") == "");
}

TEST_CASE("stream slots: one address is capped, others still get theirs", "[rpc]") {
  StreamSlots slots(/*total=*/10, /*per_address=*/2);
  Refusal why = Refusal::kTotal;
  std::vector<std::unique_ptr<StreamSlots::Slot>> held;
  held.push_back(slots.Acquire("ipv4:10.0.0.1:1", &why));
  held.push_back(slots.Acquire("ipv4:10.0.0.1:2", &why));
  CHECK(why == Refusal::kNone);
  REQUIRE(held[0]);
  REQUIRE(held[1]);
  CHECK(slots.Acquire("ipv4:10.0.0.1:3", &why) == nullptr);
  CHECK(why == Refusal::kPerAddress);
  CHECK(slots.refused(Refusal::kPerAddress) == 1);
  auto other = slots.Acquire("ipv4:10.0.0.2:1", &why);
  CHECK(other != nullptr);
  CHECK(slots.open() == 3);
  held.pop_back();  // a stream ends: its address may open one again
  CHECK(slots.open() == 2);
  CHECK(slots.Acquire("ipv4:10.0.0.1:4", &why) != nullptr);
}

TEST_CASE("stream slots: the member-wide cap holds across addresses", "[rpc]") {
  StreamSlots slots(/*total=*/3, /*per_address=*/3);
  Refusal why = Refusal::kNone;
  std::vector<std::unique_ptr<StreamSlots::Slot>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(slots.Acquire("ipv4:10.0.0." + std::to_string(i) + ":1", &why));
    REQUIRE(held.back());
  }
  CHECK(slots.Acquire("ipv4:10.0.0.9:1", &why) == nullptr);
  CHECK(why == Refusal::kTotal);
  CHECK(slots.refused(Refusal::kTotal) == 1);
  CHECK(slots.refused(Refusal::kPerAddress) == 0);
  held.clear();
  CHECK(slots.open() == 0);
  CHECK(slots.Acquire("ipv4:10.0.0.9:1", &why) != nullptr);
}

TEST_CASE("stream slots: metrics show open streams and refusals by reason", "[rpc]") {
  StreamSlots slots(1, 1);
  Refusal why = Refusal::kNone;
  auto held = slots.Acquire("ipv4:10.0.0.1:1", &why);
  (void)slots.Acquire("ipv4:10.0.0.1:2", &why);
  (void)slots.Acquire("ipv4:10.0.0.2:2", &why);
  std::string text;
  MetricsText m(&text);
  slots.RenderMetrics(m, "epoch_test_streams", "Test streams");
  CHECK(text.find("epoch_test_streams 1\n") != std::string::npos);
  CHECK(text.find("epoch_test_streams_refused_total{reason=\"total\"} 2\n") != std::string::npos);
  CHECK(text.find("epoch_test_streams_refused_total{reason=\"per_address\"} 0\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace epoch
