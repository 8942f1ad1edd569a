// SessionCore: the pure state machine behind epoch::client::Session — a lease kept alive by
// renewals, and the worker's own, conservative view of how long that lease is still valid.
// No threads, no sockets: time comes from the injected Clock, I/O is done by the caller (Session,
// or a test), which reports what it sent and what came back.
//
// Timing rules (docs/timing-and-safety.md §8):
//   - A renewal (keep-alive) is due every TTL/3, measured from the previous send.
//   - Validity is measured from the SEND time of the last acknowledged renewal, never from the
//     receive time of its reply (clientv3's mistake): the server renewed the lease at some instant
//     after we sent, so on the server's clock the lease lasts at least until send + TTL. Our clock
//     may run slower than the cluster's by up to the drift bound ρ, so on our clock:
//         deadline = send_time + TTL / (1 + ρ)
//   - healthy → degraded when a renewal is not acknowledged within TTL/3 of being sent, or the
//     keep-alive stream breaks. Degraded means: finish what you hold, take no new work.
//     degraded → healthy on the next acknowledgement, once nothing is overdue and the stream is up.
//   - → lost at 70 % of the validity: now >= send_time + 0.7 · TTL / (1 + ρ), or at once when the
//     server reports the lease gone (TTL <= 0). Lost is terminal: the session's std::stop_source is
//     requested, so every call bound to stop_token() is cancelled, and the worker must stop before
//     the cluster can give the lease to someone else (the remaining 30 % is the margin for the
//     worker to notice and abort). In poison-pill mode the kill action runs first (default:
//     SIGKILL to the own process) — for workers whose downstream writes cannot be fenced.
//
// Threading: not thread-safe; one thread drives it (Session's keep-alive thread, or a test).
// state() and stop_token() may be read from any thread. Callbacks run synchronously on the
// driving thread, inside the call that caused the transition; they must not call back into the
// core. std::stop_callbacks registered on stop_token() run on the driving thread as well.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "epoch/client/clock.h"
#include "epoch/strong_int.h"

namespace epoch::client {

enum class SessionState { kHealthy, kDegraded, kLost };

std::string_view SessionStateName(SessionState state);

struct SessionOptions {
  // The TTL requested from the cluster. The TTL that counts is the one each reply carries.
  std::chrono::milliseconds ttl{10'000};
  // Bound on the rate difference between this host's monotonic clock and the cluster's
  // (docs/timing-and-safety.md §8, ρ). 0.01 = 1 %.
  double drift_rho = 0.01;
  // Fraction of the validity window after which the session is lost (self-abort point).
  double lost_fraction = 0.7;
  // Kill the process when the session is lost, instead of only cancelling.
  bool poison_pill = false;
};

struct SessionTransition {
  SessionState from;
  SessionState to;
  TimePoint at;
  std::string reason;
};

struct SessionCounters {
  std::uint64_t keepalives_sent = 0;
  std::uint64_t keepalive_acks = 0;
  std::uint64_t late_acks = 0;  // replies that arrived after the session was lost (ignored)
  std::uint64_t stream_breaks = 0;
  std::uint64_t entered_degraded = 0;
  std::uint64_t recovered = 0;  // degraded → healthy
  std::uint64_t entered_lost = 0;
  std::uint64_t kills = 0;      // poison-pill kill actions run
  Duration max_ack_latency{0};  // send → acknowledgement, worst seen
};

class SessionCore {
 public:
  using TransitionCallback = std::function<void(const SessionTransition&)>;
  using KillAction = std::function<void()>;

  // `clock` must outlive the core. `kill` is the poison-pill action; empty = SIGKILL own process.
  SessionCore(SessionOptions options, const Clock* clock, KillAction kill = {});

  SessionCore(const SessionCore&) = delete;
  SessionCore& operator=(const SessionCore&) = delete;

  // The lease was granted. `grant_sent_at` is when the LeaseGrant request was sent (it counts as
  // the first acknowledged renewal); `granted_ttl` is the TTL in the grant reply.
  void Start(LeaseId lease, std::chrono::milliseconds granted_ttl, TimePoint grant_sent_at);

  // When the next renewal should be sent. Meaningless once lost.
  [[nodiscard]] TimePoint NextKeepAliveAt() const { return next_keepalive_at_; }

  // A renewal was sent (or its send was attempted) now. Returns its sequence number, which the
  // caller passes back with the reply. Replies on one stream arrive in send order.
  std::uint64_t OnKeepAliveSent();

  // The reply to renewal `seq` arrived now with `ttl` (<= 0: the lease is gone on the server).
  // Also acknowledges every older outstanding renewal.
  void OnKeepAliveAck(std::uint64_t seq, std::chrono::milliseconds ttl);

  // The keep-alive stream broke; outstanding renewals will never be answered.
  void OnStreamBroken(std::string_view why);
  // A new keep-alive stream is up (recovery still needs an acknowledgement).
  void OnStreamRestored();

  // Re-evaluates the time-based transitions at clock->Now(). Call at least at NextDeadline().
  void Tick();

  // The earliest instant at which Tick() could change the state (or send a renewal).
  [[nodiscard]] TimePoint NextDeadline() const;

  // Ends the session for a reason the core cannot see (revoked, lease not found). The poison
  // pill runs, as for a loss the core detects.
  void Lose(std::string reason);
  // Ends the session because the worker gave its lease up (Session::Close): lost, stop requested,
  // callbacks run, but never the kill action: nothing the lease protected is at risk.
  void Close(std::string reason);

  void AddTransitionCallback(TransitionCallback callback) {
    callbacks_.push_back(std::move(callback));
  }

  [[nodiscard]] SessionState state() const { return state_.load(std::memory_order_acquire); }
  [[nodiscard]] bool CanTakeNewWork() const { return state() == SessionState::kHealthy; }
  [[nodiscard]] std::stop_token stop_token() const { return stop_source_.get_token(); }
  [[nodiscard]] LeaseId lease() const { return lease_; }
  [[nodiscard]] const SessionCounters& counters() const { return counters_; }
  [[nodiscard]] const SessionOptions& options() const { return options_; }

  // The lease's validity on our clock: send time of the last acknowledged renewal + TTL/(1+ρ).
  [[nodiscard]] TimePoint Deadline() const { return deadline_; }
  // The self-abort instant: last acknowledged send + lost_fraction · TTL/(1+ρ).
  [[nodiscard]] TimePoint LostAt() const { return lost_at_; }
  // Time left before Deadline() (zero if past).
  [[nodiscard]] Duration Remaining() const;

 private:
  // Validity window of one renewal: ttl / (1 + ρ), rounded down.
  [[nodiscard]] Duration Validity(std::chrono::milliseconds ttl) const;
  [[nodiscard]] Duration RenewInterval() const { return current_ttl_ / 3; }
  [[nodiscard]] bool RenewalOverdue(TimePoint now) const;
  void Transition(SessionState to, TimePoint now, std::string reason);
  void EnterLost(TimePoint now, std::string reason);

  const SessionOptions options_;
  const Clock* const clock_;
  KillAction kill_;
  std::vector<TransitionCallback> callbacks_;
  std::stop_source stop_source_;

  std::atomic<SessionState> state_{SessionState::kHealthy};
  bool started_ = false;
  LeaseId lease_{0};
  // TTL carried by the latest reply (the server may raise the requested TTL).
  std::chrono::milliseconds current_ttl_{0};
  // Send time of the newest acknowledged renewal (the grant counts as one). Never decreases.
  TimePoint last_acked_send_{};
  // deadline_ = max over acknowledged renewals of send + Validity(ttl); lost_at_ likewise with
  // lost_fraction. Neither ever moves backwards.
  TimePoint deadline_{};
  TimePoint lost_at_{};
  TimePoint next_keepalive_at_{};
  // Renewals sent and not yet acknowledged, oldest first: (sequence, send time).
  std::deque<std::pair<std::uint64_t, TimePoint>> outstanding_;
  // Send time of the oldest renewal that no acknowledgement has followed yet; survives a stream
  // break (the renewals lost with the stream are still unanswered). Empty when nothing is owed.
  std::optional<TimePoint> unanswered_since_;
  bool stream_up_ = true;
  std::uint64_t next_seq_ = 1;
  SessionCounters counters_;
};

}  // namespace epoch::client
