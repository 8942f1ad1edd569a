// SessionCore driven by a FakeClock: every timing rule of docs/timing-and-safety.md §8, no sleeps.
#include "epoch/client/session_core.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <stop_token>
#include <vector>

#include "epoch/client/clock.h"

namespace epoch::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

// TTL 3 s with ρ = 0.25 gives round numbers: validity 2400 ms, lost at 1680 ms, renew every 1 s.
SessionOptions Options() {
  SessionOptions options;
  options.ttl = milliseconds(3000);
  options.drift_rho = 0.25;
  options.lost_fraction = 0.7;
  return options;
}

struct Recorder {
  std::vector<SessionTransition> transitions;
  void Attach(SessionCore& core) {
    core.AddTransitionCallback([this](const SessionTransition& t) { transitions.push_back(t); });
  }
};

TEST_CASE("Session starts healthy with the deadline taken from the grant's send time",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  const TimePoint sent = clock.Now();
  clock.Advance(milliseconds(200));  // the grant reply took 200 ms
  core.Start(LeaseId(7), milliseconds(3000), sent);
  REQUIRE(core.state() == SessionState::kHealthy);
  REQUIRE(core.CanTakeNewWork());
  REQUIRE(core.lease() == LeaseId(7));
  REQUIRE(core.Deadline() == sent + milliseconds(2400));
  REQUIRE(core.LostAt() == sent + milliseconds(1680));
  REQUIRE(core.NextKeepAliveAt() == sent + milliseconds(1000));
  REQUIRE(core.Remaining() == milliseconds(2200));
  REQUIRE_FALSE(core.stop_token().stop_requested());
}

TEST_CASE("A renewal extends the deadline from its send time, not from the reply",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1000));
  const TimePoint sent = clock.Now();
  const std::uint64_t seq = core.OnKeepAliveSent();
  clock.Advance(milliseconds(500));  // slow reply
  core.OnKeepAliveAck(seq, milliseconds(3000));
  REQUIRE(core.Deadline() == sent + milliseconds(2400));  // receive-time would give +500 ms more
  REQUIRE(core.LostAt() == sent + milliseconds(1680));
  REQUIRE(core.counters().keepalive_acks == 1);
  REQUIRE(core.counters().max_ack_latency == milliseconds(500));
}

TEST_CASE("Steady renewals every TTL/3 keep the session healthy indefinitely",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  Recorder recorder;
  recorder.Attach(core);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  for (int cycle = 0; cycle < 100; ++cycle) {
    // Drive exactly as the keep-alive thread does: wake at the next deadline, tick, send if due.
    clock.Advance(core.NextKeepAliveAt() - clock.Now());
    core.Tick();
    const std::uint64_t seq = core.OnKeepAliveSent();
    clock.Advance(milliseconds(20));
    core.OnKeepAliveAck(seq, milliseconds(3000));
    REQUIRE(core.state() == SessionState::kHealthy);
  }
  REQUIRE(recorder.transitions.empty());
  REQUIRE(core.counters().keepalives_sent == 100);
  REQUIRE(core.counters().keepalive_acks == 100);
}

TEST_CASE("No acknowledgement within TTL/3 degrades, the next acknowledgement recovers",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  Recorder recorder;
  recorder.Attach(core);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1000));
  const std::uint64_t seq = core.OnKeepAliveSent();
  REQUIRE(core.NextDeadline() == clock.Now() + milliseconds(680));  // lost_at comes first
  clock.Advance(milliseconds(679));
  core.Tick();
  REQUIRE(core.state() == SessionState::kHealthy);
  clock.Advance(milliseconds(1));  // 1680 ms after the grant: the abort point
  core.Tick();
  REQUIRE(core.state() == SessionState::kLost);
  (void)seq;

  // Same again with a longer lost fraction so degraded is observable on its own.
  SessionOptions options = Options();
  options.lost_fraction = 0.95;  // lost at 2280 ms
  FakeClock clock2;
  SessionCore core2(options, &clock2);
  Recorder recorder2;
  recorder2.Attach(core2);
  core2.Start(LeaseId(2), milliseconds(3000), clock2.Now());
  clock2.Advance(milliseconds(1000));
  const std::uint64_t seq2 = core2.OnKeepAliveSent();
  clock2.Advance(milliseconds(999));
  core2.Tick();
  REQUIRE(core2.state() == SessionState::kHealthy);
  clock2.Advance(milliseconds(1));  // TTL/3 after the unanswered send
  core2.Tick();
  REQUIRE(core2.state() == SessionState::kDegraded);
  REQUIRE_FALSE(core2.CanTakeNewWork());
  REQUIRE_FALSE(core2.stop_token().stop_requested());
  clock2.Advance(milliseconds(100));
  core2.OnKeepAliveAck(seq2, milliseconds(3000));
  REQUIRE(core2.state() == SessionState::kHealthy);
  REQUIRE(recorder2.transitions.size() == 2);
  REQUIRE(recorder2.transitions[0].to == SessionState::kDegraded);
  REQUIRE(recorder2.transitions[1].from == SessionState::kDegraded);
  REQUIRE(recorder2.transitions[1].to == SessionState::kHealthy);
  REQUIRE(core2.counters().entered_degraded == 1);
  REQUIRE(core2.counters().recovered == 1);
}

TEST_CASE("Without acknowledgements the session is lost at 70 % of TTL/(1+rho) and cancels",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  Recorder recorder;
  recorder.Attach(core);
  const TimePoint start = clock.Now();
  core.Start(LeaseId(1), milliseconds(3000), start);

  // Bind a "downstream call" to the session's stop token.
  bool cancelled = false;
  std::stop_callback on_stop(core.stop_token(), [&] { cancelled = true; });

  // The keep-alive thread keeps sending every TTL/3 but nothing comes back.
  while (core.state() != SessionState::kLost) {
    clock.Advance(core.NextDeadline() - clock.Now());
    core.Tick();
    if (core.state() != SessionState::kLost && clock.Now() >= core.NextKeepAliveAt()) {
      (void)core.OnKeepAliveSent();
    }
  }
  REQUIRE(clock.Now() == start + milliseconds(1680));
  REQUIRE(cancelled);
  REQUIRE(core.stop_token().stop_requested());
  REQUIRE(recorder.transitions.size() == 1);  // 1680 ms comes before the 2000 ms degrade point
  REQUIRE(recorder.transitions[0].from == SessionState::kHealthy);
  REQUIRE(recorder.transitions[0].to == SessionState::kLost);
  REQUIRE(recorder.transitions[0].at == start + milliseconds(1680));
  REQUIRE(core.counters().entered_lost == 1);
  // Lost is terminal: a late reply changes nothing.
  core.OnKeepAliveAck(1, milliseconds(3000));
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(core.counters().late_acks == 1);
}

TEST_CASE("The full path healthy -> degraded -> lost with a realistic drift bound",
          "[client][session]") {
  SessionOptions options;
  options.ttl = milliseconds(9000);
  options.drift_rho = 0.01;
  FakeClock clock;
  SessionCore core(options, &clock);
  Recorder recorder;
  recorder.Attach(core);
  const TimePoint start = clock.Now();
  core.Start(LeaseId(1), milliseconds(9000), start);
  clock.Advance(milliseconds(3000));
  (void)core.OnKeepAliveSent();  // never answered
  clock.Advance(milliseconds(2999));
  core.Tick();
  REQUIRE(core.state() == SessionState::kHealthy);
  clock.Advance(milliseconds(1));
  core.Tick();
  REQUIRE(core.state() == SessionState::kDegraded);
  // lost at 0.7 * 9000 / 1.01 ms = 6237.62... ms after the grant's send.
  const TimePoint lost_at = core.LostAt();
  REQUIRE(lost_at - start > milliseconds(6237));
  REQUIRE(lost_at - start < milliseconds(6238));
  clock.Advance(lost_at - clock.Now() - nanoseconds(1));
  core.Tick();
  REQUIRE(core.state() == SessionState::kDegraded);
  clock.Advance(nanoseconds(1));
  core.Tick();
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(recorder.transitions.size() == 2);
  REQUIRE(recorder.transitions[1].from == SessionState::kDegraded);
  REQUIRE(recorder.transitions[1].to == SessionState::kLost);
}

TEST_CASE("A reply with TTL <= 0 means the lease is gone: lost at once", "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1000));
  const std::uint64_t seq = core.OnKeepAliveSent();
  clock.Advance(milliseconds(5));
  core.OnKeepAliveAck(seq, milliseconds(0));
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(core.stop_token().stop_requested());
}

TEST_CASE("A broken keep-alive stream degrades at once, restored plus ack recovers",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  Recorder recorder;
  recorder.Attach(core);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(100));
  const std::uint64_t lost_seq = core.OnKeepAliveSent();
  core.OnStreamBroken("connection reset");
  REQUIRE(core.state() == SessionState::kDegraded);
  REQUIRE(core.counters().stream_breaks == 1);
  REQUIRE(recorder.transitions.back().reason.find("connection reset") != std::string::npos);
  // A reply on the new stream is not enough while the stream is reported down...
  clock.Advance(milliseconds(50));
  const std::uint64_t seq = core.OnKeepAliveSent();
  core.Tick();
  REQUIRE(core.state() == SessionState::kDegraded);
  core.OnStreamRestored();
  clock.Advance(milliseconds(10));
  core.OnKeepAliveAck(seq, milliseconds(3000));
  REQUIRE(core.state() == SessionState::kHealthy);
  REQUIRE(lost_seq < seq);
}

TEST_CASE("An acknowledgement covers every older outstanding renewal (FIFO stream)",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1000));
  (void)core.OnKeepAliveSent();
  clock.Advance(milliseconds(100));
  const TimePoint second_sent = clock.Now();
  const std::uint64_t second = core.OnKeepAliveSent();
  clock.Advance(milliseconds(10));
  core.OnKeepAliveAck(second, milliseconds(3000));
  REQUIRE(core.Deadline() == second_sent + milliseconds(2400));
  // Nothing is owed any more: no degrade even long after the first send.
  clock.Advance(milliseconds(950));
  core.Tick();
  REQUIRE(core.state() == SessionState::kHealthy);
}

TEST_CASE("A process pause past the abort point goes straight to lost, even if a reply waits",
          "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  Recorder recorder;
  recorder.Attach(core);
  const TimePoint start = clock.Now();
  core.Start(LeaseId(1), milliseconds(3000), start);
  clock.Advance(milliseconds(1000));
  const std::uint64_t seq = core.OnKeepAliveSent();
  clock.Advance(milliseconds(5000));  // SIGSTOP; the reply sat in the socket buffer meanwhile
  core.OnKeepAliveAck(seq, milliseconds(3000));
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(recorder.transitions.size() == 1);
  REQUIRE(recorder.transitions[0].from == SessionState::kHealthy);
  REQUIRE(core.counters().late_acks == 1);
}

TEST_CASE("The server's TTL in the reply is the one that counts", "[client][session]") {
  FakeClock clock;
  SessionCore core(Options(), &clock);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1000));
  const TimePoint sent = clock.Now();
  const std::uint64_t seq = core.OnKeepAliveSent();
  core.OnKeepAliveAck(seq, milliseconds(6000));  // the server raised the TTL
  REQUIRE(core.Deadline() == sent + milliseconds(4800));
  REQUIRE(core.NextKeepAliveAt() == sent + milliseconds(1000));  // interval set at send time
  const std::uint64_t next = core.OnKeepAliveSent();
  REQUIRE(core.NextKeepAliveAt() == sent + milliseconds(2000));  // now TTL/3 of 6 s
  (void)next;
}

TEST_CASE("Poison pill runs the kill action before cancelling and before callbacks",
          "[client][session]") {
  SessionOptions options = Options();
  options.poison_pill = true;
  FakeClock clock;
  int kills = 0;
  bool stop_seen_at_kill = true;
  SessionCore* core_ptr = nullptr;
  SessionCore core(options, &clock, [&] {
    ++kills;
    stop_seen_at_kill = core_ptr->stop_token().stop_requested();
  });
  core_ptr = &core;
  bool callback_after_kill = false;
  core.AddTransitionCallback([&](const SessionTransition&) { callback_after_kill = kills == 1; });
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1680));
  core.Tick();
  REQUIRE(kills == 1);
  REQUIRE_FALSE(stop_seen_at_kill);
  REQUIRE(callback_after_kill);
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(core.counters().kills == 1);
  core.Tick();
  core.Lose("again");
  REQUIRE(kills == 1);  // terminal: never killed twice
}

TEST_CASE("Closing a session ends it without the poison pill", "[client][session]") {
  SessionOptions options = Options();
  options.poison_pill = true;
  FakeClock clock;
  int kills = 0;
  SessionCore core(options, &clock, [&] { ++kills; });
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  core.Close("closed by the worker");
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(core.stop_token().stop_requested());
  REQUIRE(kills == 0);
  clock.Advance(milliseconds(10'000));
  core.Tick();
  REQUIRE(kills == 0);  // lost is terminal: no later loss either
}

TEST_CASE("Without poison pill the kill action never runs", "[client][session]") {
  FakeClock clock;
  int kills = 0;
  SessionCore core(Options(), &clock, [&] { ++kills; });
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  core.Lose("revoked by the worker");
  REQUIRE(core.state() == SessionState::kLost);
  REQUIRE(kills == 0);
  REQUIRE(core.stop_token().stop_requested());
}

TEST_CASE("A driver that stops sending is still degraded by the backstop", "[client][session]") {
  SessionOptions options = Options();
  options.lost_fraction = 0.95;
  FakeClock clock;
  SessionCore core(options, &clock);
  core.Start(LeaseId(1), milliseconds(3000), clock.Now());
  clock.Advance(milliseconds(1999));
  core.Tick();
  REQUIRE(core.state() == SessionState::kHealthy);
  clock.Advance(milliseconds(1));  // 2·TTL/3 without any acknowledged send
  core.Tick();
  REQUIRE(core.state() == SessionState::kDegraded);
}

}  // namespace
}  // namespace epoch::client
