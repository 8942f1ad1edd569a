// A member's start against the cluster's recorded timing (epoch/node/cluster_timing_keeper.h):
// given settings that differ refuse the start naming both values, defaults adopt the record, a
// lowered election timeout makes the start withhold for the one it replaced, and a change is
// checked against the Raft core's rules before it is written.
#include "epoch/node/cluster_timing_keeper.h"

#include <catch2/catch.hpp>

#include "epoch/raft/memory_log.h"

namespace epoch::server {
namespace {

NodeConfig Member() {
  NodeConfig c;
  c.name = "n1";
  c.data_dir = "/tmp/x";
  REQUIRE(
      ParseInitialCluster("n1=127.0.0.1:2380,n2=127.0.0.1:2381,n3=127.0.0.1:2382", "", &c).ok());
  c.raft.id = MemberIdFor(c.cluster_token, c.name);
  c.tick = std::chrono::milliseconds(10);
  c.raft.heartbeat_ticks = 5;
  c.raft.election_timeout_min_ticks = 15;
  c.raft.max_election_timeout_ticks = 60;
  return c;
}

v1::StoredClusterTiming Record(std::int64_t heartbeat, std::int64_t election,
                               std::int64_t previous_election = 0) {
  v1::StoredClusterTiming r;
  v1::TimingSettings* t = r.mutable_current();
  t->set_tick_ms(10);
  t->set_heartbeat_ms(heartbeat);
  t->set_election_timeout_ms(election);
  t->set_max_clock_drift(0.05);
  if (previous_election != 0) {
    *r.mutable_previous() = *t;
    r.mutable_previous()->set_election_timeout_ms(previous_election);
  }
  r.set_index(7);
  return r;
}

TEST_CASE("timing at start: no record keeps the flags", "[server][timing]") {
  NodeConfig c = Member();
  Result<std::optional<std::string>> r = BootTiming(&c, nullptr);
  REQUIRE(r.ok());
  CHECK_FALSE(r->has_value());
  CHECK(c.raft.election_timeout_min_ticks == 15);
}

TEST_CASE("timing at start: a given election timeout that differs refuses, naming both",
          "[server][timing]") {
  NodeConfig c = Member();
  c.raft.election_timeout_min_ticks = 100;  // --election-timeout 1000
  c.given_timing.election_timeout = true;
  const v1::StoredClusterTiming record = Record(50, 150);
  Result<std::optional<std::string>> r = BootTiming(&c, &record);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(r.status().message(),
             Catch::Contains("--election-timeout 1000 ms (the cluster's is 150 ms)"));
  CHECK_THAT(r.status().message(), Catch::Contains("epochctl cluster timing set"));
  // The same value given explicitly is fine.
  c.raft.election_timeout_min_ticks = 15;
  CHECK(BootTiming(&c, &record).ok());
}

TEST_CASE("timing at start: defaults adopt the record, and say so", "[server][timing]") {
  NodeConfig c = Member();
  const v1::StoredClusterTiming record = Record(100, 300);
  Result<std::optional<std::string>> r = BootTiming(&c, &record);
  REQUIRE(r.ok());
  REQUIRE(r->has_value());
  CHECK_THAT(**r, Catch::Contains("election timeout 300 ms"));
  CHECK(c.raft.heartbeat_ticks == 10);
  CHECK(c.raft.election_timeout_min_ticks == 30);
  CHECK(c.raft.max_election_timeout_ticks == 120);
  CHECK(c.raft.boot_withhold_ticks == 0);
}

TEST_CASE("timing at start: after a lowered election timeout, withhold for the old one",
          "[server][timing]") {
  NodeConfig c = Member();
  const v1::StoredClusterTiming record = Record(20, 60, /*previous_election=*/300);
  REQUIRE(BootTiming(&c, &record).ok());
  CHECK(c.raft.election_timeout_min_ticks == 6);
  CHECK(c.raft.boot_withhold_ticks == 30);
}

TEST_CASE(
    "timing while running: the cluster's first record refuses a given value, a change does "
    "not",
    "[server][timing]") {
  NodeConfig c = Member();
  c.raft.election_timeout_min_ticks = 100;
  c.given_timing.election_timeout = true;
  const std::optional<std::string> first = FirstRecordConflict(c, Record(50, 150));
  REQUIRE(first.has_value());
  CHECK_THAT(*first, Catch::Contains("--election-timeout 1000 ms (the cluster's is 150 ms)"));
  // A member that restarted with its store behind its log first sees a later change: it adopts.
  CHECK_FALSE(FirstRecordConflict(c, Record(50, 300, /*previous_election=*/150)).has_value());
}

TEST_CASE("timing changes are checked against the Raft rules", "[server][timing]") {
  const NodeConfig c = Member();
  const v1::StoredClusterTiming record = Record(50, 150);
  v1::TimingSettings next = record.current();
  next.set_election_timeout_ms(300);
  CHECK(CheckTimingFor(c, next, &record).ok());
  next.set_election_timeout_ms(30);  // 3 ticks: no lease of at least one tick is left
  next.set_heartbeat_ms(10);
  const Status s = CheckTimingFor(c, next, &record);
  CHECK(s.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(s.message(), Catch::Contains("raise the election floor"));
  next.set_tick_ms(5);
  CHECK_THAT(CheckTimingFor(c, next, &record).message(), Catch::Contains("the tick cannot change"));
}

}  // namespace
}  // namespace epoch::server

namespace epoch::server {
namespace {

raft::Entry TimingEntry(std::uint64_t index, std::int64_t election_ms) {
  v1::InternalRequest request;
  v1::TimingSettings* t = request.mutable_cluster_timing()->mutable_timing();
  t->set_tick_ms(10);
  t->set_heartbeat_ms(50);
  t->set_election_timeout_ms(election_ms);
  return raft::Entry{Term(2), LogIndex(index), raft::EntryType::kNormal,
                     request.SerializeAsString()};
}

TEST_CASE("timing at start: the longest election timeout logged after the store's applied index",
          "[server][timing]") {
  raft::MemoryLog log = raft::MemoryLog::Bootstrapped({NodeId(1), NodeId(2), NodeId(3)});
  v1::InternalRequest put;
  put.mutable_put()->set_key("k");
  log.Append({raft::Entry{Term(2), LogIndex(2), raft::EntryType::kNormal, ""}, TimingEntry(3, 450),
              raft::Entry{Term(2), LogIndex(4), raft::EntryType::kNormal, put.SerializeAsString()},
              TimingEntry(5, 200),
              raft::Entry{Term(2), LogIndex(6), raft::EntryType::kNormal, "not a request"}});
  CHECK(ScanLoggedTiming(log, LogIndex(1), nullptr).longest_election_timeout_ms == 450);
  CHECK(ScanLoggedTiming(log, LogIndex(3), nullptr).longest_election_timeout_ms == 200);
  CHECK(ScanLoggedTiming(log, LogIndex(5), nullptr).longest_election_timeout_ms == 0);
  CHECK(ScanLoggedTiming(log, LogIndex(6), nullptr).longest_election_timeout_ms == 0);

  // The record a start compares its flags with: the log's entries on top of the store's record.
  auto stored = std::make_shared<v1::StoredClusterTiming>();
  stored->mutable_current()->set_tick_ms(10);
  stored->mutable_current()->set_heartbeat_ms(50);
  stored->mutable_current()->set_election_timeout_ms(150);
  ClusterTimingPtr latest = ScanLoggedTiming(log, LogIndex(1), stored).latest;
  REQUIRE(latest != nullptr);
  CHECK(latest->current().election_timeout_ms() == 200);
  CHECK(latest->previous().election_timeout_ms() == 450);
  CHECK(latest->index() == 5);
  CHECK(ScanLoggedTiming(log, LogIndex(5), stored).latest == stored);
  CHECK(ScanLoggedTiming(log, LogIndex(5), nullptr).latest == nullptr);
}

}  // namespace
}  // namespace epoch::server
