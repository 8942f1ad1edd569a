// Session: a lease kept alive in the background, and the worker's conservative view of it
// (docs/architecture.md §9). The timing rules live in SessionCore (session_core.h); Session is its
// driver: it grants the lease, renews it every TTL/3 on a keep-alive stream, re-opens the stream
// with backoff when it breaks, and feeds every send and reply to the core.
//
//   auto session = Session::Create(client, options);
//   Mutex mutex(client, **session, "jobs/42");
//   ... every call of the worker passes CallOptions{.stop = session->stop_token()} ...
//
// When the session is lost (no acknowledged renewal for 70 % of TTL/(1+ρ), or the cluster says
// the lease is gone) stop_token() is requested: every call bound to it is cancelled. The worker
// must then stop using anything the lease protected. Lost is final; make a new Session.
//
// Threading: all methods are thread-safe. Two internal threads (timer/sender and reply reader)
// drive the core under one mutex. Transition callbacks run on those threads, after the mutex is
// released; std::stop_callbacks on stop_token() run on them too, with the mutex held — keep those
// short (e.g. TryCancel a call) and never call back into the Session from them. Never call
// Close() from a transition callback (it joins the thread that runs the callback).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stop_token>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/session_core.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"

namespace epoch::client {

struct SessionConfig {
  // ttl (rounded up to whole seconds on the etcd wire, at least 1 s), drift_rho, lost_fraction,
  // poison_pill.
  SessionOptions timing;
  // Called on every state transition (healthy/degraded/lost), on an internal thread.
  std::vector<SessionCore::TransitionCallback> on_transition;
  // Poison-pill action; empty = SIGKILL the own process.
  SessionCore::KillAction kill;
  // Pacing of keep-alive stream re-opens.
  BackoffOptions reconnect{std::chrono::milliseconds(50), std::chrono::milliseconds(1000), 0};
  std::uint64_t seed = 0x5e55;
};

class Session {
 public:
  // Grants the lease (LeaseGrant) and starts keeping it alive. `client` must outlive the session.
  static Result<std::unique_ptr<Session>> Create(Client* client, SessionConfig config);
  // Close()s.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Stops the keep-alive, revokes the lease (its keys, e.g. lock keys, go with it) and ends the
  // session (state lost, stop requested, reason "closed"). Idempotent.
  Status Close();

  [[nodiscard]] LeaseId lease() const;
  [[nodiscard]] SessionState state() const;
  [[nodiscard]] bool CanTakeNewWork() const { return state() == SessionState::kHealthy; }
  [[nodiscard]] std::stop_token stop_token() const;
  // Time left before the conservative deadline (send of last acked renewal + TTL/(1+ρ)).
  [[nodiscard]] Duration Remaining() const;
  [[nodiscard]] SessionCounters counters() const;

  struct Impl;

 private:
  explicit Session(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace epoch::client
