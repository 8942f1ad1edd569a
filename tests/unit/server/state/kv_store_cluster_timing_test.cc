// The cluster timing in the state machine (epoch/state/cluster_timing.h): the first record wins
// over later if_unset proposals, a change keeps the setting it replaced and the index that set
// it, the record survives a restart and travels in snapshot images, and timing a cluster cannot
// run is refused deterministically without moving the revision.
#include <catch2/catch.hpp>

#include "epoch/state/cluster_timing.h"
#include "store_test_util.h"

namespace epoch::server {
namespace {

using namespace epoch::server::testing;  // NOLINT(google-build-using-namespace)

v1::TimingSettings Timing(std::int64_t tick, std::int64_t heartbeat, std::int64_t election,
                          double drift = 0.05) {
  v1::TimingSettings t;
  t.set_tick_ms(tick);
  t.set_heartbeat_ms(heartbeat);
  t.set_election_timeout_ms(election);
  t.set_max_clock_drift(drift);
  return t;
}

ApplyResult Set(TestStore& s, const v1::TimingSettings& timing, bool if_unset) {
  v1::InternalRequest req;
  *req.mutable_cluster_timing()->mutable_timing() = timing;
  req.mutable_cluster_timing()->set_if_unset(if_unset);
  return s.Apply(req);
}

TEST_CASE("cluster timing: the first record wins, a change keeps the one it replaced",
          "[server][timing]") {
  TempDir dir;
  TestStore s(dir.Sub("a"));
  CHECK(s->ClusterTiming() == nullptr);
  const LogIndex first = s->AppliedIndex().Next();
  ApplyResult r = Set(s, Timing(10, 50, 150), true);
  REQUIRE(r.status.ok());
  CHECK(r.response.cluster_timing().changed());
  // Another member's bootstrap proposal, with other values, changes nothing.
  r = Set(s, Timing(10, 100, 1000), true);
  REQUIRE(r.status.ok());
  CHECK_FALSE(r.response.cluster_timing().changed());
  REQUIRE(s->ClusterTiming() != nullptr);
  CHECK(SameTiming(s->ClusterTiming()->current(), Timing(10, 50, 150)));
  CHECK(s->ClusterTiming()->index() == first.value());
  CHECK_FALSE(s->ClusterTiming()->has_previous());

  // A change (not if_unset) replaces it and remembers the previous one.
  const LogIndex change = s->AppliedIndex().Next();
  r = Set(s, Timing(10, 100, 1000, 0.1), false);
  REQUIRE(r.status.ok());
  CHECK(r.response.cluster_timing().changed());
  ClusterTimingPtr t = s->ClusterTiming();
  CHECK(SameTiming(t->current(), Timing(10, 100, 1000, 0.1)));
  CHECK(SameTiming(t->previous(), Timing(10, 50, 150)));
  CHECK(t->index() == change.value());
  // The same values again are no change.
  CHECK_FALSE(Set(s, Timing(10, 100, 1000, 0.1), false).response.cluster_timing().changed());
  CHECK(s->CurrentRevision() == Revision(1));

  s.Reopen();
  REQUIRE(s->ClusterTiming() != nullptr);
  CHECK(s->ClusterTiming()->SerializeAsString() == t->SerializeAsString());
  REQUIRE(s->CreateCheckpoint(dir.Sub("image")).ok());
  TestStore follower(dir.Sub("b"));
  REQUIRE(follower->ReplaceWithCheckpoint(dir.Sub("image")).ok());
  REQUIRE(follower->ClusterTiming() != nullptr);
  CHECK(follower->ClusterTiming()->SerializeAsString() == t->SerializeAsString());
}

TEST_CASE("cluster timing: values a cluster cannot run are refused", "[server][timing]") {
  TempDir dir;
  TestStore s(dir.path());
  auto refused = [&](const v1::TimingSettings& t, bool if_unset, const std::string& why) {
    ApplyResult r = Set(s, t, if_unset);
    CHECK(r.status.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(r.status.message(), Catch::Contains(why));
  };
  refused(Timing(0, 50, 150), true, "tick 0 ms");
  refused(Timing(2000, 2000, 6000), true, "tick 2000 ms");
  refused(Timing(10, 55, 150), true, "heartbeat interval 55 ms");
  refused(Timing(10, 50, 155), true, "election timeout 155 ms");
  refused(Timing(10, 60, 150), true, "at least three heartbeat intervals");
  refused(Timing(10, 50, 150, 1.0), true, "max clock drift 1");
  CHECK(s->ClusterTiming() == nullptr);
  REQUIRE(Set(s, Timing(10, 50, 150), true).status.ok());
  refused(Timing(20, 60, 200), false, "the tick cannot change while the cluster runs");
  CHECK(SameTiming(s->ClusterTiming()->current(), Timing(10, 50, 150)));
}

}  // namespace
}  // namespace epoch::server
