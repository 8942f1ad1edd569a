// Session driver. Two threads per session:
//   - the timer thread (Run): opens the keep-alive stream (with backoff), sends a renewal when
//     SessionCore says one is due, sleeps until the core's next deadline, and ticks the core;
//   - one reader thread per stream (ReadLoop): hands every reply to the core, in FIFO order.
// Both touch the core only with mu_ held. Transitions are queued while the mutex is held and
// delivered to the user's callbacks after it is released (FlushCallbacks).
#include "epoch/client/session.h"

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace epoch::client {

struct Session::Impl {
  Client* client = nullptr;
  SessionConfig config;

  mutable std::mutex mu;
  std::condition_variable_any cv;
  std::unique_ptr<SessionCore> core;         // guarded by mu
  std::deque<std::uint64_t> in_flight;       // renewals sent on the current stream; guarded by mu
  std::uint64_t stream_generation = 0;       // bumped per stream; guarded by mu
  bool stream_broken = true;                 // no usable stream; guarded by mu
  std::vector<SessionTransition> delivered;  // transitions awaiting callbacks; guarded by mu
  std::mutex callback_mu;  // callbacks are delivered one batch at a time, in order
  bool closed = false;     // guarded by mu
  std::jthread timer;

  void FlushCallbacks() {
    std::lock_guard order(callback_mu);
    std::vector<SessionTransition> batch;
    {
      std::lock_guard lock(mu);
      batch.swap(delivered);
    }
    for (const auto& transition : batch) {
      for (const auto& callback : config.on_transition) callback(transition);
    }
  }

  // Marks the current stream unusable (once per generation) and tells the core.
  void BreakStream(std::uint64_t generation, std::string_view why) {
    if (generation != stream_generation || stream_broken || closed) return;
    stream_broken = true;
    in_flight.clear();
    core->OnStreamBroken(why);
    cv.notify_all();
  }

  void ReadLoop(KeepAliveStream* stream, std::uint64_t generation) {
    while (true) {
      Result<etcdserverpb::LeaseKeepAliveResponse> reply = stream->Receive();
      {
        std::lock_guard lock(mu);
        if (!reply.ok()) {
          BreakStream(generation, reply.status().ToString());
        } else if (generation == stream_generation && !stream_broken && !in_flight.empty()) {
          const std::uint64_t seq = in_flight.front();
          in_flight.pop_front();
          core->OnKeepAliveAck(seq, std::chrono::seconds(reply->ttl()));
          cv.notify_all();
        }
      }
      FlushCallbacks();
      if (!reply.ok()) return;
    }
  }

  // Returns true when a stream is up (opened now or before).
  bool EnsureStream(const std::stop_token& stop, std::unique_ptr<KeepAliveStream>& stream,
                    std::jthread& reader, Backoff& backoff) {
    {
      std::lock_guard lock(mu);
      if (!stream_broken) return true;
    }
    if (stream) stream->Cancel();
    if (reader.joinable()) reader.join();
    stream.reset();
    Result<std::unique_ptr<KeepAliveStream>> opened = client->OpenKeepAlive(stop);
    if (!opened.ok()) {
      {
        std::unique_lock lock(mu);
        core->OnStreamBroken(opened.status().ToString());
        const auto delay = backoff.NextDelay();
        cv.wait_for(lock, stop, delay, [] { return false; });
      }
      FlushCallbacks();
      return false;
    }
    backoff.Reset();
    stream = std::move(opened).value();
    std::uint64_t generation = 0;
    {
      std::lock_guard lock(mu);
      generation = ++stream_generation;
      stream_broken = false;
      in_flight.clear();
      core->OnStreamRestored();
    }
    reader = std::jthread([this, s = stream.get(), generation] { ReadLoop(s, generation); });
    SendRenewal(*stream, generation);  // a fresh stream renews at once
    return true;
  }

  void SendRenewal(KeepAliveStream& stream, std::uint64_t generation) {
    {
      std::lock_guard lock(mu);
      in_flight.push_back(core->OnKeepAliveSent());
    }
    const Status sent = stream.SendKeepAlive(core->lease());  // lease() is immutable once started
    if (!sent.ok()) {
      std::lock_guard lock(mu);
      BreakStream(generation, sent.ToString());
    }
  }

  void Run(const std::stop_token& stop) {
    Backoff backoff(config.reconnect, config.seed);
    std::unique_ptr<KeepAliveStream> stream;
    std::jthread reader;
    while (!stop.stop_requested()) {
      {
        std::lock_guard lock(mu);
        core->Tick();
        if (core->state() == SessionState::kLost) break;
      }
      FlushCallbacks();
      if (!EnsureStream(stop, stream, reader, backoff)) continue;
      std::uint64_t generation = 0;
      bool due = false;
      {
        std::unique_lock lock(mu);
        generation = stream_generation;
        due = SteadyClock::Instance()->Now() >= core->NextKeepAliveAt();
        if (!due) {
          const TimePoint wake = core->NextDeadline();
          cv.wait_until(lock, stop, wake, [this, generation] {
            return stream_broken || generation != stream_generation ||
                   core->state() == SessionState::kLost;
          });
        }
      }
      if (due) SendRenewal(*stream, generation);
    }
    if (stream) stream->Cancel();
    if (reader.joinable()) reader.join();
    FlushCallbacks();
  }
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Session::~Session() { (void)Close(); }

Result<std::unique_ptr<Session>> Session::Create(Client* client, SessionConfig config) {
  if (client == nullptr) return Status::InvalidArgument("session needs a client");
  if (config.timing.ttl.count() <= 0) return Status::InvalidArgument("session TTL must be > 0");
  auto impl = std::make_unique<Impl>();
  impl->client = client;
  impl->config = std::move(config);

  // etcd TTLs are whole seconds: round up so the lease is never shorter than asked.
  const auto ttl_ms = impl->config.timing.ttl.count();
  etcdserverpb::LeaseGrantRequest grant;
  grant.set_ttl(std::max<std::int64_t>(1, (ttl_ms + 999) / 1000));
  const TimePoint sent = SteadyClock::Instance()->Now();
  Result<etcdserverpb::LeaseGrantResponse> granted = client->LeaseGrant(grant);
  if (!granted.ok()) return granted.status().Annotate("session: lease grant");
  if (!granted->error().empty()) {
    return Status::Unavailable("session: lease grant: " + granted->error());
  }

  Impl* raw = impl.get();
  impl->core = std::make_unique<SessionCore>(impl->config.timing, SteadyClock::Instance(),
                                             impl->config.kill);
  impl->core->AddTransitionCallback(
      [raw](const SessionTransition& t) { raw->delivered.push_back(t); });  // mu is held
  {
    std::lock_guard lock(impl->mu);
    impl->core->Start(LeaseId(granted->id()), std::chrono::seconds(granted->ttl()), sent);
  }
  impl->timer = std::jthread([raw](const std::stop_token& stop) { raw->Run(stop); });
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Status Session::Close() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->closed) return Status::Ok();
    impl_->closed = true;
  }
  impl_->timer.request_stop();
  impl_->cv.notify_all();
  if (impl_->timer.joinable()) impl_->timer.join();

  etcdserverpb::LeaseRevokeRequest revoke;
  revoke.set_id(lease().value());
  CallOptions call;
  call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max<Duration>(impl_->config.timing.ttl, std::chrono::seconds(1)));
  Result<etcdserverpb::LeaseRevokeResponse> revoked = impl_->client->LeaseRevoke(revoke, call);
  {
    std::lock_guard lock(impl_->mu);
    impl_->core->Close("session closed");
  }
  impl_->FlushCallbacks();
  // An expired lease is already revoked.
  if (!revoked.ok() && revoked.status().code() != StatusCode::kNotFound) {
    return revoked.status().Annotate("session close: revoke");
  }
  return Status::Ok();
}

LeaseId Session::lease() const {
  std::lock_guard lock(impl_->mu);
  return impl_->core->lease();
}

SessionState Session::state() const { return impl_->core->state(); }  // atomic in the core

std::stop_token Session::stop_token() const { return impl_->core->stop_token(); }

Duration Session::Remaining() const {
  std::lock_guard lock(impl_->mu);
  return impl_->core->Remaining();
}

SessionCounters Session::counters() const {
  std::lock_guard lock(impl_->mu);
  return impl_->core->counters();
}

}  // namespace epoch::client
