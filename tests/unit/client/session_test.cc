// Session (the SessionCore driver) against a real etcd: renewals, loss by revoke, by a paused
// server, and survival of a member failure. Waits are bounded condition waits, never sleeps.
#include "epoch/client/session.h"

#include <signal.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>

#include "epoch/test_support/eventually.h"
#include "etcd_server.h"

namespace epoch::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::Eventually;
using test_support::kProcessPoll;

std::unique_ptr<Client> NewClient(std::vector<std::string> endpoints) {
  ClientOptions options;
  options.endpoints = std::move(endpoints);
  options.call_timeout = milliseconds(3000);
  auto client = Client::Create(options);
  REQUIRE(client.ok());
  return std::move(client).value();
}

// Records transitions from the session's internal threads.
struct Transitions {
  std::mutex mu;
  std::vector<SessionTransition> seen;
  SessionCore::TransitionCallback Callback() {
    return [this](const SessionTransition& t) {
      std::lock_guard lock(mu);
      seen.push_back(t);
    };
  }
  std::vector<SessionTransition> Snapshot() {
    std::lock_guard lock(mu);
    return seen;
  }
};

TEST_CASE("Session keeps its lease alive and revokes it on Close", "[client][session][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  SessionConfig config;
  config.timing.ttl = seconds(2);
  Transitions transitions;
  config.on_transition.push_back(transitions.Callback());
  auto session = Session::Create(client.get(), config);
  REQUIRE(session.ok());
  const LeaseId lease = (*session)->lease();
  REQUIRE(lease.value() != 0);

  // Several renewals in a row: at ~TTL/3 each, so the lease outlives its TTL.
  REQUIRE(Eventually([&] { return (*session)->counters().keepalive_acks >= 5; }, seconds(15),
                     kProcessPoll));
  CHECK((*session)->state() == SessionState::kHealthy);
  CHECK((*session)->Remaining() > milliseconds(0));
  CHECK_FALSE((*session)->stop_token().stop_requested());
  etcdserverpb::LeaseTimeToLiveRequest ttl;
  ttl.set_id(lease.value());
  auto alive = client->LeaseTimeToLive(ttl);
  REQUIRE(alive.ok());
  CHECK(alive->ttl() > 0);

  REQUIRE((*session)->Close().ok());
  CHECK((*session)->state() == SessionState::kLost);
  CHECK((*session)->stop_token().stop_requested());
  auto revoked = client->LeaseTimeToLive(ttl);
  REQUIRE(revoked.ok());
  CHECK(revoked->ttl() == -1);
  const auto seen = transitions.Snapshot();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].to == SessionState::kLost);
  CHECK(seen[0].reason == "session closed");
}

TEST_CASE("Session is lost when the cluster revokes its lease, and cancels bound calls",
          "[client][session][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  SessionConfig config;
  config.timing.ttl = seconds(3);
  Transitions transitions;
  config.on_transition.push_back(transitions.Callback());
  auto session = Session::Create(client.get(), config);
  REQUIRE(session.ok());
  std::atomic<bool> cancelled{false};
  std::stop_callback bound((*session)->stop_token(), [&] { cancelled = true; });

  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id((*session)->lease().value());
  REQUIRE(client->LeaseRevoke(revoke).ok());
  // The state turns kLost (and the stop token fires) before the transition callbacks run: wait
  // for the callback, not just the state.
  REQUIRE(Eventually(
      [&] {
        const auto now = transitions.Snapshot();
        return !now.empty() && now.back().to == SessionState::kLost;
      },
      seconds(10), kProcessPoll));
  CHECK((*session)->state() == SessionState::kLost);
  CHECK(cancelled);
  const auto seen = transitions.Snapshot();
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back().to == SessionState::kLost);
  CHECK(seen.back().reason.find("TTL <= 0") != std::string::npos);
}

TEST_CASE("Closing a session with the poison pill on does not run the kill action",
          "[client][session][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  SessionConfig config;
  config.timing.ttl = seconds(3);
  config.timing.poison_pill = true;
  std::atomic<int> kills{0};
  config.kill = [&] { ++kills; };
  auto session = Session::Create(client.get(), config);
  REQUIRE(session.ok());
  REQUIRE((*session)->Close().ok());
  CHECK((*session)->state() == SessionState::kLost);
  CHECK((*session)->stop_token().stop_requested());
  CHECK(kills == 0);  // a worker exiting normally must not SIGKILL itself
  CHECK((*session)->counters().kills == 0);
}

TEST_CASE("Session against a paused server: lost before its lease can expire",
          "[client][session][etcd]") {
  testing::EtcdCluster etcd;
  auto client = NewClient(etcd.Endpoints());
  SessionConfig config;
  config.timing.ttl = seconds(3);  // room for a slow first renewal (sanitizer builds)
  config.timing.poison_pill = true;
  std::atomic<int> kills{0};
  config.kill = [&] { ++kills; };  // injected: the test process must survive
  Transitions transitions;
  config.on_transition.push_back(transitions.Callback());
  auto session = Session::Create(client.get(), config);
  REQUIRE(session.ok());
  REQUIRE(Eventually([&] { return (*session)->counters().keepalive_acks >= 1; }, seconds(10),
                     kProcessPoll));

  REQUIRE(etcd.Pause(0));
  // Wait for the transition callback, which runs after the state and the stop token change.
  const bool lost = Eventually(
      [&] {
        const auto now = transitions.Snapshot();
        return !now.empty() && now.back().to == SessionState::kLost;
      },
      seconds(10), kProcessPoll);
  REQUIRE(::kill(etcd.Pid(0), SIGCONT) == 0);
  REQUIRE(lost);
  CHECK(kills == 1);
  CHECK((*session)->stop_token().stop_requested());
  const auto seen = transitions.Snapshot();
  REQUIRE_FALSE(seen.empty());
  CHECK(seen.back().to == SessionState::kLost);
  // The self-abort instant lies before the conservative deadline (send + TTL/(1+ρ)).
  const SessionCounters counters = (*session)->counters();
  CHECK(counters.entered_lost == 1);
  CHECK(counters.keepalive_acks >= 1);
  for (const auto& t : seen) {
    INFO(SessionStateName(t.from) << " -> " << SessionStateName(t.to) << ": " << t.reason);
    CHECK(t.to != SessionState::kHealthy);  // no recovery while the server was stopped
  }
}

TEST_CASE("Session survives the loss of the member its stream used", "[client][session][etcd]") {
  testing::EtcdCluster etcd(3);
  auto client = NewClient(etcd.Endpoints());  // prefers endpoint 0
  SessionConfig config;
  config.timing.ttl = seconds(6);
  Transitions transitions;
  config.on_transition.push_back(transitions.Callback());
  auto session = Session::Create(client.get(), config);
  REQUIRE(session.ok());
  REQUIRE(Eventually([&] { return (*session)->counters().keepalive_acks >= 1; }, seconds(10),
                     kProcessPoll));
  etcd.StopMember(0);
  // The stream breaks (degraded), is re-opened on another member, and a renewal is acknowledged.
  REQUIRE(Eventually(
      [&] {
        const SessionCounters c = (*session)->counters();
        const auto now = transitions.Snapshot();
        return c.stream_breaks >= 1 && c.recovered >= 1 &&
               (*session)->state() == SessionState::kHealthy && !now.empty() &&
               now.back().to == SessionState::kHealthy;
      },
      seconds(20), kProcessPoll));
  CHECK_FALSE((*session)->stop_token().stop_requested());
  CHECK(client->preferred_endpoint() != 0);
  const auto seen = transitions.Snapshot();
  REQUIRE(seen.size() >= 2);
  CHECK(seen[0].to == SessionState::kDegraded);
  CHECK(seen.back().to == SessionState::kHealthy);
}

}  // namespace
}  // namespace epoch::client
