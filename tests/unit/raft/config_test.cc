// Config::Validate: every timing rule of docs/timing-and-safety.md §10 with the message it gives.
#include "epoch/raft/config.h"

#include <catch2/catch.hpp>

namespace epoch::raft {
namespace {

Config Valid() {
  Config c;
  c.id = NodeId(1);
  return c;
}

void RequireInvalid(const Config& c, const std::string& fragment) {
  const Status s = c.Validate();
  CAPTURE(s.ToString());
  REQUIRE(s.Is(StatusCode::kInvalidArgument));
  CHECK(s.message().find(fragment) != std::string::npos);
}

TEST_CASE("config: the defaults are valid and follow the suggested timing", "[raft][config]") {
  const Config c = Valid();
  CHECK(c.Validate().ok());
  CHECK(c.heartbeat_ticks == 5);
  CHECK(c.election_timeout_min_ticks == 15);
  CHECK(c.election_jitter_ticks == 15);
  CHECK(c.pre_vote);
  CHECK(c.check_quorum);
  // floor(15 / 1.05) - 2 = 14 - 2.
  CHECK(c.MaxSafeLeaseTicks() == 12);
  CHECK(c.EffectiveLeaseTicks() == 12);
}

TEST_CASE("config: each violated rule is named with its values", "[raft][config]") {
  Config c = Valid();
  c.id = NodeId(0);
  RequireInvalid(c, "id must not be 0");

  c = Valid();
  c.heartbeat_ticks = 8;
  RequireInvalid(c, "heartbeat_ticks (8) must be at most election_timeout_min_ticks / 3 (5.0)");

  c = Valid();
  c.heartbeat_ticks = 0;
  RequireInvalid(c, "heartbeat_ticks (0) must be at least 1");

  c = Valid();
  c.election_jitter_ticks = 0;
  RequireInvalid(c, "election_jitter_ticks (0) must be at least 1");

  c = Valid();
  c.max_election_timeout_ticks = 10;
  RequireInvalid(c,
                 "max_election_timeout_ticks (10) must be at least election_timeout_min_ticks "
                 "(15)");

  c = Valid();
  c.max_clock_drift = 1.5;
  RequireInvalid(c, "max_clock_drift (1.5) must be in [0, 1)");

  c = Valid();
  c.lease_margin_ticks = 0;
  RequireInvalid(c, "lease_margin_ticks (0) must be at least 1");

  c = Valid();
  c.lease_ticks = 13;
  RequireInvalid(c, "lease_ticks (13) must be in [0, 12]");

  c = Valid();
  c.election_timeout_min_ticks = 3;
  c.heartbeat_ticks = 1;
  c.max_election_timeout_ticks = 3;
  RequireInvalid(c, "is below 1 tick: raise the election floor");

  c = Valid();
  c.durability_stall_ticks = 0;
  RequireInvalid(c, "durability_stall_ticks (0) must be at least 1");

  c = Valid();
  c.max_inflight_msgs = 0;
  RequireInvalid(c, "max_inflight_msgs must be at least 1");

  c = Valid();
  c.max_inflight_bytes = 10;
  c.max_msg_bytes = 100;
  RequireInvalid(c, "max_inflight_bytes (10) must be at least max_msg_bytes (100)");
}

TEST_CASE("config: the lease shrinks with the drift bound and the margin", "[raft][config]") {
  Config c = Valid();
  c.max_clock_drift = 0.0;
  c.lease_margin_ticks = 1;
  CHECK(c.MaxSafeLeaseTicks() == 14);
  c.max_clock_drift = 0.5;
  CHECK(c.MaxSafeLeaseTicks() == 9);  // floor(15 / 1.5) - 1
  c.lease_ticks = 5;
  CHECK(c.Validate().ok());
  CHECK(c.EffectiveLeaseTicks() == 5);
  CHECK(c.EffectiveTransferTimeoutTicks() == 15);
  c.transfer_timeout_ticks = 40;
  CHECK(c.EffectiveTransferTimeoutTicks() == 40);
}

}  // namespace
}  // namespace epoch::raft
