#include "epoch/client/session_core.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cmath>

namespace epoch::client {

std::string_view SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kHealthy: return "healthy";
    case SessionState::kDegraded: return "degraded";
    case SessionState::kLost: return "lost";
  }
  return "unknown";
}

namespace {

void KillOwnProcess() {
  // SIGKILL: no handlers, no atexit, no buffered output flushed that could carry a late write.
  ::kill(::getpid(), SIGKILL);
}

}  // namespace

SessionCore::SessionCore(SessionOptions options, const Clock* clock, KillAction kill)
    : options_(options), clock_(clock), kill_(kill ? std::move(kill) : KillAction(KillOwnProcess)) {
  assert(clock_ != nullptr);
  assert(options_.ttl.count() > 0);
  assert(options_.drift_rho >= 0.0 && options_.drift_rho < 1.0);
  assert(options_.lost_fraction > 0.0 && options_.lost_fraction < 1.0);
}

Duration SessionCore::Validity(std::chrono::milliseconds ttl) const {
  const Duration full = ttl;
  return Duration(static_cast<Duration::rep>(
      std::floor(static_cast<double>(full.count()) / (1.0 + options_.drift_rho))));
}

void SessionCore::Start(LeaseId lease, std::chrono::milliseconds granted_ttl,
                        TimePoint grant_sent_at) {
  assert(!started_);
  assert(granted_ttl.count() > 0);
  started_ = true;
  lease_ = lease;
  current_ttl_ = granted_ttl;
  last_acked_send_ = grant_sent_at;
  const Duration validity = Validity(granted_ttl);
  deadline_ = grant_sent_at + validity;
  lost_at_ = grant_sent_at + Duration(static_cast<Duration::rep>(
                                 static_cast<double>(validity.count()) * options_.lost_fraction));
  next_keepalive_at_ = grant_sent_at + RenewInterval();
  Tick();  // the grant reply may itself have arrived too late
}

std::uint64_t SessionCore::OnKeepAliveSent() {
  assert(started_);
  const TimePoint now = clock_->Now();
  const std::uint64_t seq = next_seq_++;
  outstanding_.emplace_back(seq, now);
  if (!unanswered_since_) unanswered_since_ = now;
  next_keepalive_at_ = now + RenewInterval();
  ++counters_.keepalives_sent;
  return seq;
}

void SessionCore::OnKeepAliveAck(std::uint64_t seq, std::chrono::milliseconds ttl) {
  assert(started_);
  const TimePoint now = clock_->Now();
  if (state() == SessionState::kLost) {
    ++counters_.late_acks;
    return;
  }
  // Conservative order: if the abort point passed before this reply was processed, the worker
  // already ran past its safe window; the reply cannot undo that.
  if (now >= lost_at_) {
    ++counters_.late_acks;
    EnterLost(now, "abort point passed before the renewal reply was processed");
    return;
  }
  auto it = std::find_if(outstanding_.begin(), outstanding_.end(),
                         [seq](const auto& sent) { return sent.first == seq; });
  assert(it != outstanding_.end() && "acknowledgement for a renewal that is not outstanding");
  const TimePoint sent_at = it->second;
  outstanding_.erase(outstanding_.begin(), it + 1);  // FIFO: older renewals are answered too
  ++counters_.keepalive_acks;
  counters_.max_ack_latency = std::max(counters_.max_ack_latency, Duration(now - sent_at));

  if (ttl.count() <= 0) {
    EnterLost(now, "the cluster reports the lease expired or unknown (TTL <= 0)");
    return;
  }
  current_ttl_ = ttl;
  last_acked_send_ = std::max(last_acked_send_, sent_at);
  const Duration validity = Validity(ttl);
  deadline_ = std::max(deadline_, sent_at + validity);
  lost_at_ = std::max(
      lost_at_, sent_at + Duration(static_cast<Duration::rep>(
                              static_cast<double>(validity.count()) * options_.lost_fraction)));
  if (outstanding_.empty()) {
    unanswered_since_.reset();
  } else {
    unanswered_since_ = outstanding_.front().second;
  }
  Tick();
}

void SessionCore::OnStreamBroken(std::string_view why) {
  ++counters_.stream_breaks;
  stream_up_ = false;
  outstanding_.clear();  // never answered; unanswered_since_ keeps the oldest send time
  if (state() == SessionState::kHealthy) {
    Transition(SessionState::kDegraded, clock_->Now(),
               fmt::format("keep-alive stream broke: {}", why));
  }
  Tick();
}

void SessionCore::OnStreamRestored() { stream_up_ = true; }

bool SessionCore::RenewalOverdue(TimePoint now) const {
  const Duration interval = RenewInterval();
  if (unanswered_since_ && now - *unanswered_since_ >= interval) return true;
  // Backstop for a driver that stopped sending: the renewal due at last_acked_send_ + interval
  // should have been answered by last_acked_send_ + 2·interval.
  return now - last_acked_send_ >= 2 * interval;
}

void SessionCore::Tick() {
  if (!started_ || state() == SessionState::kLost) return;
  const TimePoint now = clock_->Now();
  if (now >= lost_at_) {
    EnterLost(now, fmt::format("no acknowledged renewal sent within the last {} of validity",
                               std::chrono::duration_cast<std::chrono::milliseconds>(
                                   lost_at_ - last_acked_send_)));
    return;
  }
  const bool degraded = !stream_up_ || RenewalOverdue(now);
  if (degraded && state() == SessionState::kHealthy) {
    Transition(SessionState::kDegraded, now,
               stream_up_ ? "renewal not acknowledged within TTL/3" : "keep-alive stream down");
  } else if (!degraded && state() == SessionState::kDegraded) {
    Transition(SessionState::kHealthy, now, "renewal acknowledged");
  }
}

TimePoint SessionCore::NextDeadline() const {
  TimePoint next = std::min(next_keepalive_at_, lost_at_);
  const Duration interval = RenewInterval();
  if (state() == SessionState::kHealthy) {
    if (unanswered_since_) next = std::min(next, *unanswered_since_ + interval);
    next = std::min(next, last_acked_send_ + 2 * interval);
  }
  return next;
}

void SessionCore::Lose(std::string reason) {
  if (state() == SessionState::kLost) return;
  EnterLost(clock_->Now(), std::move(reason));
}

void SessionCore::Close(std::string reason) {
  if (state() == SessionState::kLost) return;
  Transition(SessionState::kLost, clock_->Now(), std::move(reason));
}

Duration SessionCore::Remaining() const {
  const TimePoint now = clock_->Now();
  return now >= deadline_ ? Duration(0) : Duration(deadline_ - now);
}

void SessionCore::EnterLost(TimePoint now, std::string reason) {
  if (options_.poison_pill) {
    // Poison pill: die before anything else can run. An injected action may return (tests);
    // then the session still ends the ordinary way.
    ++counters_.kills;
    kill_();
  }
  Transition(SessionState::kLost, now, std::move(reason));
}

void SessionCore::Transition(SessionState to, TimePoint now, std::string reason) {
  const SessionState from = state();
  assert(from != SessionState::kLost && "lost is terminal");
  assert(from != to);
  state_.store(to, std::memory_order_release);
  switch (to) {
    case SessionState::kDegraded: ++counters_.entered_degraded; break;
    case SessionState::kHealthy: ++counters_.recovered; break;
    case SessionState::kLost: ++counters_.entered_lost; break;
  }
  // Cancel first, then tell: a slow callback must not delay the cancellation.
  if (to == SessionState::kLost) stop_source_.request_stop();
  const SessionTransition transition{from, to, now, std::move(reason)};
  for (const auto& callback : callbacks_) callback(transition);
}

}  // namespace epoch::client
