// Client: endpoint selection, deadlines, the two retry loops (idempotent / write), the auth token,
// and the etcd v3 calls as thin lambdas over them. See client.h for the contract.
#include "epoch/client/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <string_view>
#include <utility>

#include "epoch/client/errors.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "grpc_status.h"

namespace epoch::client {

using internal::Classified;
using internal::Disposition;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

// The metadata key a server may attach (trailing) to a "not leader" reply to name the leader's
// client endpoint. Optional: without it the client asks every endpoint for its Status.
constexpr std::string_view kLeaderHintKey = "epoch-leader-endpoint";

// How long past a keyed write's deadline the server remembers its answer (the key's ttl_ms is
// the call's remaining time plus this).
constexpr std::chrono::milliseconds kKeyedWriteTtlMargin{60'000};

// How long a client with a password sends calls without a token after the cluster said auth is
// off, before it tries Authenticate again (auth may be enabled meanwhile; a call refused for
// lack of a user does not trigger it sooner).
constexpr std::chrono::seconds kAuthOffRecheck{1};

// A client session id for epoch.v1.Idempotent keys: 16 random bytes, unique per Client.
std::string RandomClientId() {
  std::random_device device;
  std::string id(16, '\0');
  for (char& c : id) c = static_cast<char>(device() & 0xff);
  return id;
}

// Whether any branch of `txn`, at any depth, writes (the server's IsReadOnlyTxn, mirrored).
bool TxnWrites(const etcdserverpb::TxnRequest& txn) {
  for (const auto* ops : {&txn.success(), &txn.failure()}) {
    for (const etcdserverpb::RequestOp& op : *ops) {
      if (op.has_request_put() || op.has_request_delete_range()) return true;
      if (op.has_request_txn() && TxnWrites(op.request_txn())) return true;
    }
  }
  return false;
}

std::string StripScheme(std::string endpoint) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (std::string_view(endpoint).starts_with(scheme)) return endpoint.substr(scheme.size());
  }
  return endpoint;
}

std::chrono::system_clock::time_point ToSystem(SteadyTime deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             deadline - std::chrono::steady_clock::now());
}

// Sleeps up to `d`, waking early on a stop request. Returns false when stopped.
bool SleepFor(std::chrono::nanoseconds d, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  return !cv.wait_for(lock, stop, d, [] { return false; }) && !stop.stop_requested();
}

}  // namespace

// The token of password auth. Shared with the streams the client opens: a stream whose token the
// server refused drops it, so the next Token() call authenticates again.
struct TokenCache {
  std::mutex mu;
  std::string token;  // empty: not authenticated yet, or dropped after a refusal

  std::string Get() {
    std::lock_guard lock(mu);
    return token;
  }
  void Set(std::string fresh) {
    std::lock_guard lock(mu);
    token = std::move(fresh);
  }
  // Forgets `used` unless another thread already replaced it.
  void Drop(const std::string& used) {
    std::lock_guard lock(mu);
    if (token == used) token.clear();
  }
};

struct Endpoint {
  std::string target;  // host:port
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  std::unique_ptr<etcdserverpb::Cluster::Stub> cluster;
  std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
  std::unique_ptr<etcdserverpb::Auth::Stub> auth;
  std::unique_ptr<v1::Idempotent::Stub> idempotent;
};

struct Client::Impl {
  ClientOptions options;
  std::vector<Endpoint> endpoints;
  // Index of the endpoint calls go to first. Any thread may move it.
  std::atomic<std::size_t> preferred{0};
  std::atomic<std::uint64_t> calls{0};
  std::shared_ptr<TokenCache> tokens = std::make_shared<TokenCache>();
  // Held while authenticating, so that concurrent callers wait for one fresh token.
  std::mutex authenticate_mu;
  // Until when the cluster is taken to run without auth (it answered "authentication is not
  // enabled"): calls go without a token, as etcd's Go client does. Guarded by authenticate_mu.
  SteadyTime auth_off_until{};
  std::atomic<std::uint64_t> authentications{0};
  // epoch.v1.Idempotent keys: this client's session id and its next sequence number.
  const std::string client_id = RandomClientId();
  std::atomic<std::uint64_t> next_sequence{1};
  // Set once a server answered UNIMPLEMENTED for epoch.v1.Idempotent (etcd): writes go to KV.
  std::atomic<bool> idempotent_unsupported{false};
  std::atomic<std::uint64_t> replayed_writes{0};

  bool PasswordAuth() const { return !options.user.empty() && !options.password.empty(); }

  SteadyTime DeadlineOf(const CallOptions& call) const {
    return std::chrono::steady_clock::now() + call.timeout.value_or(options.call_timeout);
  }

  Backoff NewBackoff() {
    const std::uint64_t n = calls.fetch_add(1, std::memory_order_relaxed);
    return Backoff(options.retry, options.seed ^ (n * 0x9e3779b97f4a7c15ULL));
  }

  // Moves away from endpoint `from` unless another thread already did.
  void Rotate(std::size_t from) {
    std::size_t expected = from;
    preferred.compare_exchange_strong(expected, (from + 1) % endpoints.size());
  }

  // After a "not leader" answer: follow the server's hint if it names one of our endpoints.
  bool FollowHint(const grpc::ClientContext& context) {
    const auto& trailers = context.GetServerTrailingMetadata();
    const auto it = trailers.find(grpc::string_ref(kLeaderHintKey.data(), kLeaderHintKey.size()));
    if (it == trailers.end()) return false;
    const std::string hint = StripScheme(std::string(it->second.data(), it->second.size()));
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      if (endpoints[i].target == hint) {
        preferred.store(i);
        return true;
      }
    }
    return false;
  }

  void PrepareContext(grpc::ClientContext& context, SteadyTime deadline,
                      const std::string& token) const {
    context.set_deadline(ToSystem(deadline));
    if (!token.empty()) context.AddMetadata(std::string(internal::kTokenMetadata), token);
  }

  // The token to send: empty without password auth; else the cached one, or a fresh one from
  // Authenticate (the only call that may block other callers, on authenticate_mu).
  Result<std::string> Token(SteadyTime deadline, const std::stop_token& stop);
  // Drops a refused token; true when a retry with a fresh one is worth it.
  bool Refused(const Status& status, const std::string& token) {
    if (token.empty() || !internal::IsTokenRefusal(status)) return false;
    tokens->Drop(token);
    return true;
  }
  // What a stream calls when the server refused its token.
  std::function<void()> DropOnRefusal(const std::string& token) const {
    if (token.empty()) return {};
    return [tokens = tokens, token] { tokens->Drop(token); };
  }

  Status StoppedStatus(const CallOptions& call, const Status& last) const {
    if (call.stop.stop_requested()) return Status::Aborted("cancelled: " + last.ToString());
    return Status::Timeout("deadline exceeded: " + last.ToString());
  }

  // Waits until endpoint `index` has a connection, up to dial_timeout (and the call's deadline),
  // checking the stop token every 50 ms. Every call goes through here first, and not only to
  // tell "never sent" apart: with the synchronous API nothing polls a channel's sockets while
  // no call is waiting on it, so a reconnect that started while the server was down can sit
  // unnoticed until its 20 s connect timeout; WaitForConnected polls and completes it.
  bool Connect(std::size_t index, SteadyTime deadline, const std::stop_token& stop) {
    auto& channel = endpoints[index].channel;
    const SteadyTime dial_deadline =
        std::min(deadline, std::chrono::steady_clock::now() + options.dial_timeout);
    while (!stop.stop_requested()) {
      const SteadyTime now = std::chrono::steady_clock::now();
      if (now >= dial_deadline) return channel->GetState(true) == GRPC_CHANNEL_READY;
      const SteadyTime step = std::min(dial_deadline, now + std::chrono::milliseconds(50));
      if (channel->WaitForConnected(ToSystem(step))) return true;
    }
    return false;
  }

  template <typename Response, typename Fn>
  Result<Response> CallIdempotent(std::string_view what, const CallOptions& call, Fn&& fn,
                                  bool with_token = true);
  template <typename Response, typename Fn>
  Result<Response> CallWrite(std::string_view what, const CallOptions& call, Fn&& fn);
  template <typename Keyed, typename Fn>
  Result<Keyed> CallKeyed(std::string_view what, const CallOptions& call, SteadyTime deadline,
                          Fn&& fn);
  template <typename Response, typename Keyed, typename KeyedFn, typename PlainFn>
  Result<Response> CallKeyedWrite(std::string_view what, const CallOptions& call, KeyedFn&& keyed,
                                  PlainFn&& plain);
  Result<std::size_t> DiscoverLeader(SteadyTime deadline, const std::stop_token& stop);
  Result<etcdserverpb::StatusResponse> StatusOf(std::size_t index, SteadyTime deadline,
                                                const std::stop_token& stop);
  // One unary call on endpoint `index`, no retry: fn(endpoint, context, response).
  template <typename Response, typename Fn>
  Result<Response> CallOne(std::size_t index, std::string_view what, SteadyTime deadline,
                           const std::stop_token& stop, bool with_token, Fn&& fn);
};

// Reads and other idempotent calls: retried on transient failures and "not leader" answers,
// with backoff, on the next endpoint, until success, a definite answer, the attempt bound, the
// deadline, or a stop request.
template <typename Response, typename Fn>
Result<Response> Client::Impl::CallIdempotent(std::string_view what, const CallOptions& call,
                                              Fn&& fn, bool with_token) {
  const SteadyTime deadline = DeadlineOf(call);
  Backoff backoff = NewBackoff();
  Status last = Status::Unavailable(fmt::format("{}: no attempt made", what));
  bool reauthenticated = false;
  while (true) {
    if (call.stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) {
      return StoppedStatus(call, last);
    }
    const std::size_t index = preferred.load();
    Endpoint& endpoint = endpoints[index];
    if (!Connect(index, deadline, call.stop)) {
      last = Status::Unavailable(fmt::format("{}: cannot connect to {}", what, endpoint.target));
      Rotate(index);
    } else {
      std::string token;
      if (with_token) {
        Result<std::string> current = Token(deadline, call.stop);
        if (!current.ok()) return current.status();
        token = std::move(*current);
      }
      grpc::ClientContext context;
      PrepareContext(context, deadline, token);
      Response response;
      grpc::Status result;
      {
        std::stop_callback cancel(call.stop, [&context] { context.TryCancel(); });
        result = fn(endpoint, &context, &response);
      }
      Classified c = internal::Classify(result);
      if (c.disposition == Disposition::kOk) return response;
      last = c.status.Annotate(fmt::format("{} on {}", what, endpoint.target));
      // An expired token: authenticate again and repeat at once (once per call).
      if (!reauthenticated && Refused(c.status, token)) {
        reauthenticated = true;
        continue;
      }
      if (c.disposition == Disposition::kFinal) return last;
      if (c.disposition == Disposition::kStopped) return StoppedStatus(call, last);
      if (c.not_leader) {
        if (!FollowHint(context) && !DiscoverLeader(deadline, call.stop).ok()) Rotate(index);
      } else {
        Rotate(index);
      }
    }
    if (backoff.Exhausted()) return last;
    const auto remaining = deadline - std::chrono::steady_clock::now();
    SleepFor(std::min<std::chrono::nanoseconds>(backoff.NextDelay(), remaining), call.stop);
  }
}

// Non-idempotent calls: sent again only when the server provably did not act on them.
template <typename Response, typename Fn>
Result<Response> Client::Impl::CallWrite(std::string_view what, const CallOptions& call, Fn&& fn) {
  const SteadyTime deadline = DeadlineOf(call);
  Backoff backoff = NewBackoff();
  Status last = Status::Unavailable(fmt::format("{}: no attempt made", what));
  bool reauthenticated = false;
  while (true) {
    if (call.stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) {
      return StoppedStatus(call, last);  // nothing was sent in a way that may have applied
    }
    const std::size_t index = preferred.load();
    Endpoint& endpoint = endpoints[index];
    if (!Connect(index, deadline, call.stop)) {
      // Never sent: trying elsewhere cannot apply it twice.
      last = Status::Unavailable(fmt::format("{}: cannot connect to {}", what, endpoint.target));
      Rotate(index);
    } else {
      Result<std::string> token = Token(deadline, call.stop);
      if (!token.ok()) return token.status();
      grpc::ClientContext context;
      PrepareContext(context, deadline, *token);
      Response response;
      grpc::Status result;
      {
        std::stop_callback cancel(call.stop, [&context] { context.TryCancel(); });
        result = fn(endpoint, &context, &response);
      }
      Classified c = internal::Classify(result);
      if (c.disposition == Disposition::kOk) return response;
      last = c.status.Annotate(fmt::format("{} on {}", what, endpoint.target));
      // Refused for its token before anything was applied: safe to send again, once.
      if (!reauthenticated && Refused(c.status, *token)) {
        reauthenticated = true;
        continue;
      }
      if (c.disposition == Disposition::kFinal) return last;
      if (c.disposition != Disposition::kNotApplied) return OutcomeUnknown(last);
      if (c.not_leader) {
        if (!FollowHint(context) && !DiscoverLeader(deadline, call.stop).ok()) Rotate(index);
      } else {
        Rotate(index);
      }
    }
    if (backoff.Exhausted()) return last;
    const auto remaining = deadline - std::chrono::steady_clock::now();
    SleepFor(std::min<std::chrono::nanoseconds>(backoff.NextDelay(), remaining), call.stop);
  }
}

// Writes through epoch.v1.Idempotent under one key for all attempts: an attempt whose outcome
// is unknown (transport failure, "leader changed", "request timed out") is sent again, on
// another endpoint if need be, until an answer is known or the deadline passes; the server
// applies the key at most once and answers a repeat with the first answer. Ends in
// OutcomeUnknown only when the deadline or a stop request cuts the retries short, or the server
// says the key's record expired. A server without the service (UNIMPLEMENTED) acted on nothing:
// remembered, and the write goes to KV once more.
template <typename Keyed, typename Fn>
Result<Keyed> Client::Impl::CallKeyed(std::string_view what, const CallOptions& call,
                                      SteadyTime deadline, Fn&& fn) {
  v1::IdempotencyKey key;
  key.set_client_id(client_id);
  key.set_sequence(next_sequence.fetch_add(1, std::memory_order_relaxed));
  // Remembered past the last moment this call may resend it; a later repeat cannot happen, and
  // the server would refuse it anyway (its client watermark), so a short window is safe and
  // keeps the server's table small.
  key.set_ttl_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                     deadline - std::chrono::steady_clock::now() + kKeyedWriteTtlMargin)
                     .count());
  Backoff backoff = NewBackoff();
  Status last = Status::Unavailable(fmt::format("{}: no attempt made", what));
  bool sent = false;  // an attempt reached a server and may have been applied
  bool reauthenticated = false;
  auto give_up = [&] { return sent ? OutcomeUnknown(last) : StoppedStatus(call, last); };
  while (true) {
    if (call.stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) {
      return give_up();
    }
    const std::size_t index = preferred.load();
    Endpoint& endpoint = endpoints[index];
    if (!Connect(index, deadline, call.stop)) {
      last = Status::Unavailable(fmt::format("{}: cannot connect to {}", what, endpoint.target));
      Rotate(index);
    } else {
      Result<std::string> token = Token(deadline, call.stop);
      if (!token.ok()) return sent ? OutcomeUnknown(token.status()) : token.status();
      grpc::ClientContext context;
      // An attempt that hangs (its member died without closing the connection) must leave time
      // for the next one.
      PrepareContext(
          context,
          std::min(deadline, std::chrono::steady_clock::now() + options.keyed_attempt_timeout),
          *token);
      Keyed response;
      grpc::Status result;
      {
        std::stop_callback cancel(call.stop, [&context] { context.TryCancel(); });
        result = fn(endpoint, &context, key, &response);
      }
      if (result.error_code() == grpc::StatusCode::UNIMPLEMENTED && !sent) {
        idempotent_unsupported.store(true);
        return Status::NotFound("epoch.v1.Idempotent is not served");  // see CallKeyedWrite
      }
      Classified c = internal::Classify(result);
      if (c.disposition == Disposition::kOk) {
        if (response.replayed()) replayed_writes.fetch_add(1, std::memory_order_relaxed);
        return response;
      }
      last = c.status.Annotate(fmt::format("{} on {}", what, endpoint.target));
      if (!reauthenticated && Refused(c.status, *token)) {
        reauthenticated = true;
        continue;
      }
      if (c.status.Is(ErrorId::kIdempotencyExpired)) return OutcomeUnknown(last);
      if (c.disposition == Disposition::kFinal) return last;
      if (c.disposition == Disposition::kStopped &&
          (call.stop.stop_requested() || std::chrono::steady_clock::now() >= deadline)) {
        return OutcomeUnknown(last);
      }
      // A transient failure, or the attempt's own deadline: it may have applied.
      if (c.disposition != Disposition::kNotApplied) sent = true;
      if (c.not_leader) {
        if (!FollowHint(context) && !DiscoverLeader(deadline, call.stop).ok()) Rotate(index);
      } else {
        Rotate(index);
      }
    }
    // Unlike a plain write, the attempt bound does not end a keyed write whose outcome is
    // unknown: only the deadline does.
    if (backoff.Exhausted() && !sent) return last;
    if (backoff.Exhausted()) backoff.Reset();
    const auto remaining = deadline - std::chrono::steady_clock::now();
    SleepFor(std::min<std::chrono::nanoseconds>(backoff.NextDelay(), remaining), call.stop);
  }
}

template <typename Response, typename Keyed, typename KeyedFn, typename PlainFn>
Result<Response> Client::Impl::CallKeyedWrite(std::string_view what, const CallOptions& call,
                                              KeyedFn&& keyed, PlainFn&& plain) {
  const SteadyTime deadline = DeadlineOf(call);
  if (!idempotent_unsupported.load()) {
    Result<Keyed> r = CallKeyed<Keyed>(what, call, deadline, keyed);
    if (r.ok()) return std::move(*r->mutable_response());
    if (!idempotent_unsupported.load()) return r.status();
  }
  CallOptions rest = call;
  rest.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (rest.timeout->count() <= 0) {
    return Status::Timeout(fmt::format("{}: deadline exceeded", what));
  }
  return CallWrite<Response>(what, rest, plain);
}

template <typename Response, typename Fn>
Result<Response> Client::Impl::CallOne(std::size_t index, std::string_view what,
                                       SteadyTime deadline, const std::stop_token& stop,
                                       bool with_token, Fn&& fn) {
  Endpoint& endpoint = endpoints[index];
  for (int attempt = 0;; ++attempt) {
    if (!Connect(index, deadline, stop)) {
      return Status::Unavailable(fmt::format("{} of {}: cannot connect", what, endpoint.target));
    }
    std::string token;
    if (with_token) {
      Result<std::string> current = Token(deadline, stop);
      if (!current.ok()) return current.status();
      token = std::move(*current);
    }
    grpc::ClientContext context;
    PrepareContext(context, deadline, token);
    std::stop_callback cancel(stop, [&context] { context.TryCancel(); });
    Response response;
    const grpc::Status result = fn(endpoint, context, response);
    Classified c = internal::Classify(result);
    if (c.disposition == Disposition::kOk) return response;
    if (attempt == 0 && Refused(c.status, token)) continue;
    return c.status.Annotate(fmt::format("{} of {}", what, endpoint.target));
  }
}

Result<std::string> Client::Impl::Token(SteadyTime deadline, const std::stop_token& stop) {
  if (!PasswordAuth()) return std::string();
  std::string token = tokens->Get();
  if (!token.empty()) return token;
  std::lock_guard lock(authenticate_mu);
  token = tokens->Get();
  if (!token.empty()) return token;  // another caller authenticated meanwhile
  if (std::chrono::steady_clock::now() < auth_off_until) return std::string();
  etcdserverpb::AuthenticateRequest request;
  request.set_name(options.user);
  request.set_password(options.password);
  CallOptions call;
  call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  call.stop = stop;
  if (call.timeout->count() <= 0) return Status::Timeout("deadline exceeded before Authenticate");
  // Authenticate only issues a token: sending it again is harmless, so it is retried as a read.
  Result<etcdserverpb::AuthenticateResponse> response =
      CallIdempotent<etcdserverpb::AuthenticateResponse>(
          "Authenticate", call,
          [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::AuthenticateResponse* r) {
            return e.auth->Authenticate(c, request, r);
          },
          /*with_token=*/false);
  if (!response.ok() && response.status().Is(ErrorId::kAuthNotEnabled)) {
    auth_off_until = std::chrono::steady_clock::now() + kAuthOffRecheck;
    return std::string();
  }
  if (!response.ok()) return response.status();
  if (response->token().empty()) {
    return Status::FailedPrecondition("Authenticate answered without a token");
  }
  tokens->Set(response->token());
  authentications.fetch_add(1, std::memory_order_relaxed);
  return response->token();
}

Result<etcdserverpb::StatusResponse> Client::Impl::StatusOf(std::size_t index, SteadyTime deadline,
                                                            const std::stop_token& stop) {
  // Status is open to every caller (etcd's), and leader discovery runs while authenticating.
  return CallOne<etcdserverpb::StatusResponse>(
      index, "status", deadline, stop, /*with_token=*/false,
      [](Endpoint& e, grpc::ClientContext& ctx, auto& response) {
        return e.maintenance->Status(&ctx, etcdserverpb::StatusRequest(), &response);
      });
}

Result<std::size_t> Client::Impl::DiscoverLeader(SteadyTime deadline, const std::stop_token& stop) {
  // Ask everyone at once; one unreachable endpoint must not cost the others' time.
  const SteadyTime probe_deadline =
      std::min(deadline, std::chrono::steady_clock::now() + options.dial_timeout);
  std::vector<std::future<Result<etcdserverpb::StatusResponse>>> probes;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    probes.push_back(std::async(std::launch::async, [this, i, probe_deadline, stop] {
      return StatusOf(i, probe_deadline, stop);
    }));
  }
  std::optional<std::size_t> leader;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    Result<etcdserverpb::StatusResponse> status = probes[i].get();
    if (status.ok() && status->leader() != 0 && status->leader() == status->header().member_id()) {
      leader = i;
    }
  }
  if (!leader) return Status::Unavailable("no configured endpoint reports itself leader");
  preferred.store(*leader);
  return *leader;
}

// --- Client ---

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.endpoints.empty()) return Status::InvalidArgument("no endpoints");
  if (options.call_timeout.count() <= 0 || options.dial_timeout.count() <= 0) {
    return Status::InvalidArgument("timeouts must be positive");
  }
  if (options.retry.base.count() <= 0 || options.retry.cap < options.retry.base) {
    return Status::InvalidArgument("retry backoff needs 0 < base <= cap");
  }
  if (!options.password.empty() && options.user.empty()) {
    return Status::InvalidArgument("a password needs a user name");
  }
  if (!options.user.empty() && options.password.empty() && options.tls.cert_file.empty()) {
    return Status::InvalidArgument(fmt::format(
        "user {} needs a password, or a client certificate whose CN names it", options.user));
  }
  Result<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentials(options.tls, options.endpoints);
  if (!credentials.ok()) return credentials.status();
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const ClientOptions& opts = impl->options;
  for (const std::string& name : opts.endpoints) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(opts.keepalive_time.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(opts.keepalive_timeout.count()));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
    // Reconnect quickly after a member restarts (the default backoff grows to 120 s). Leave
    // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS alone: it is also the connect-attempt timeout, and a
    // small value aborts handshakes on a loaded machine ("timed out before SETTINGS frame").
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    Endpoint endpoint;
    endpoint.target = StripScheme(name);
    endpoint.channel = grpc::CreateCustomChannel(endpoint.target, *credentials, args);
    endpoint.kv = etcdserverpb::KV::NewStub(endpoint.channel);
    endpoint.lease = etcdserverpb::Lease::NewStub(endpoint.channel);
    endpoint.watch = etcdserverpb::Watch::NewStub(endpoint.channel);
    endpoint.cluster = etcdserverpb::Cluster::NewStub(endpoint.channel);
    endpoint.maintenance = etcdserverpb::Maintenance::NewStub(endpoint.channel);
    endpoint.auth = etcdserverpb::Auth::NewStub(endpoint.channel);
    endpoint.idempotent = v1::Idempotent::NewStub(endpoint.channel);
    impl->endpoints.push_back(std::move(endpoint));
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const std::vector<std::string>& Client::endpoints() const { return impl_->options.endpoints; }
std::size_t Client::preferred_endpoint() const { return impl_->preferred.load(); }
const ClientOptions& Client::options() const { return impl_->options; }
std::shared_ptr<grpc::Channel> Client::Channel(std::size_t index) const {
  return impl_->endpoints.at(index).channel;
}

Result<std::string> Client::Authorize(grpc::ClientContext& context, const CallOptions& call) {
  Result<std::string> token = impl_->Token(impl_->DeadlineOf(call), call.stop);
  if (token.ok() && !token->empty()) {
    context.AddMetadata(std::string(internal::kTokenMetadata), *token);
  }
  return token;
}

bool Client::DropToken(const std::string& token) {
  if (token.empty()) return false;
  impl_->tokens->Drop(token);
  return true;
}

std::uint64_t Client::authentications() const { return impl_->authentications.load(); }
std::uint64_t Client::replayed_writes() const { return impl_->replayed_writes.load(); }
bool Client::idempotent_writes() const { return !impl_->idempotent_unsupported.load(); }

Result<etcdserverpb::RangeResponse> Client::Range(const etcdserverpb::RangeRequest& request,
                                                  const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::RangeResponse>(
      "Range", call, [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::RangeResponse* r) {
        return e.kv->Range(c, request, r);
      });
}

Result<etcdserverpb::PutResponse> Client::Put(const etcdserverpb::PutRequest& request,
                                              const CallOptions& call) {
  return impl_->CallKeyedWrite<etcdserverpb::PutResponse, v1::IdempotentPutResponse>(
      "Put", call,
      [&](Endpoint& e, grpc::ClientContext* c, const v1::IdempotencyKey& key,
          v1::IdempotentPutResponse* r) {
        v1::IdempotentPutRequest keyed;
        *keyed.mutable_idempotency() = key;
        *keyed.mutable_request() = request;
        return e.idempotent->Put(c, keyed, r);
      },
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::PutResponse* r) {
        return e.kv->Put(c, request, r);
      });
}

Result<etcdserverpb::DeleteRangeResponse> Client::DeleteRange(
    const etcdserverpb::DeleteRangeRequest& request, const CallOptions& call) {
  return impl_
      ->CallKeyedWrite<etcdserverpb::DeleteRangeResponse, v1::IdempotentDeleteRangeResponse>(
          "DeleteRange", call,
          [&](Endpoint& e, grpc::ClientContext* c, const v1::IdempotencyKey& key,
              v1::IdempotentDeleteRangeResponse* r) {
            v1::IdempotentDeleteRangeRequest keyed;
            *keyed.mutable_idempotency() = key;
            *keyed.mutable_request() = request;
            return e.idempotent->DeleteRange(c, keyed, r);
          },
          [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::DeleteRangeResponse* r) {
            return e.kv->DeleteRange(c, request, r);
          });
}

Result<etcdserverpb::TxnResponse> Client::Txn(const etcdserverpb::TxnRequest& request,
                                              const CallOptions& call) {
  auto plain = [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::TxnResponse* r) {
    return e.kv->Txn(c, request, r);
  };
  // A txn that cannot write changes nothing: retried as a read.
  if (!TxnWrites(request)) {
    return impl_->CallIdempotent<etcdserverpb::TxnResponse>("Txn", call, plain);
  }
  return impl_->CallKeyedWrite<etcdserverpb::TxnResponse, v1::IdempotentTxnResponse>(
      "Txn", call,
      [&](Endpoint& e, grpc::ClientContext* c, const v1::IdempotencyKey& key,
          v1::IdempotentTxnResponse* r) {
        v1::IdempotentTxnRequest keyed;
        *keyed.mutable_idempotency() = key;
        *keyed.mutable_request() = request;
        return e.idempotent->Txn(c, keyed, r);
      },
      plain);
}

Result<etcdserverpb::CompactionResponse> Client::Compact(
    const etcdserverpb::CompactionRequest& request, const CallOptions& call) {
  return impl_->CallWrite<etcdserverpb::CompactionResponse>(
      "Compact", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::CompactionResponse* r) {
        return e.kv->Compact(c, request, r);
      });
}

Result<etcdserverpb::LeaseGrantResponse> Client::LeaseGrant(
    const etcdserverpb::LeaseGrantRequest& request, const CallOptions& call) {
  // With ID = 0 a repeated grant would create a second lease: not idempotent.
  return impl_->CallWrite<etcdserverpb::LeaseGrantResponse>(
      "LeaseGrant", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::LeaseGrantResponse* r) {
        return e.lease->LeaseGrant(c, request, r);
      });
}

Result<etcdserverpb::LeaseRevokeResponse> Client::LeaseRevoke(
    const etcdserverpb::LeaseRevokeRequest& request, const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::LeaseRevokeResponse>(
      "LeaseRevoke", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::LeaseRevokeResponse* r) {
        return e.lease->LeaseRevoke(c, request, r);
      });
}

Result<etcdserverpb::LeaseTimeToLiveResponse> Client::LeaseTimeToLive(
    const etcdserverpb::LeaseTimeToLiveRequest& request, const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::LeaseTimeToLiveResponse>(
      "LeaseTimeToLive", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::LeaseTimeToLiveResponse* r) {
        return e.lease->LeaseTimeToLive(c, request, r);
      });
}

Result<etcdserverpb::LeaseLeasesResponse> Client::LeaseLeases(const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::LeaseLeasesResponse>(
      "LeaseLeases", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::LeaseLeasesResponse* r) {
        return e.lease->LeaseLeases(c, etcdserverpb::LeaseLeasesRequest(), r);
      });
}

Result<etcdserverpb::LeaseKeepAliveResponse> Client::LeaseKeepAliveOnce(LeaseId lease,
                                                                        const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::LeaseKeepAliveResponse>(
      "LeaseKeepAlive", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::LeaseKeepAliveResponse* r) {
        auto stream = e.lease->LeaseKeepAlive(c);
        etcdserverpb::LeaseKeepAliveRequest request;
        request.set_id(lease.value());
        const bool exchanged = stream->Write(request) && stream->WritesDone() && stream->Read(r);
        if (exchanged) c->TryCancel();  // one reply is all we wanted
        const grpc::Status end = stream->Finish();
        return exchanged ? grpc::Status::OK : end;
      });
}

Result<std::unique_ptr<KeepAliveStream>> Client::OpenKeepAlive(std::stop_token stop) {
  const SteadyTime deadline = impl_->DeadlineOf(CallOptions{});
  for (std::size_t tried = 0; tried < impl_->endpoints.size(); ++tried) {
    const std::size_t index = impl_->preferred.load();
    if (!impl_->Connect(index, deadline, stop)) {
      impl_->Rotate(index);
      continue;
    }
    Result<std::string> token = impl_->Token(deadline, stop);
    if (!token.ok()) return token.status();
    Endpoint& endpoint = impl_->endpoints[index];
    auto context = std::make_unique<grpc::ClientContext>();
    if (impl_->options.streams_require_leader) context->AddMetadata("hasleader", "true");
    if (!token->empty()) context->AddMetadata(std::string(internal::kTokenMetadata), *token);
    auto rpc = endpoint.lease->LeaseKeepAlive(context.get());
    return std::make_unique<KeepAliveStream>(std::move(context), std::move(rpc), endpoint.target,
                                             std::move(stop), impl_->DropOnRefusal(*token));
  }
  return Status::Unavailable("keep-alive stream: no endpoint could be connected");
}

Result<std::unique_ptr<WatchStream>> Client::OpenWatch(std::stop_token stop) {
  const SteadyTime deadline = impl_->DeadlineOf(CallOptions{});
  for (std::size_t tried = 0; tried < impl_->endpoints.size(); ++tried) {
    const std::size_t index = impl_->preferred.load();
    if (!impl_->Connect(index, deadline, stop)) {
      impl_->Rotate(index);
      continue;
    }
    Result<std::string> token = impl_->Token(deadline, stop);
    if (!token.ok()) return token.status();
    Endpoint& endpoint = impl_->endpoints[index];
    auto context = std::make_unique<grpc::ClientContext>();
    if (impl_->options.streams_require_leader) context->AddMetadata("hasleader", "true");
    if (!token->empty()) context->AddMetadata(std::string(internal::kTokenMetadata), *token);
    auto rpc = endpoint.watch->Watch(context.get());
    return std::make_unique<WatchStream>(std::move(context), std::move(rpc), endpoint.target,
                                         std::move(stop), impl_->DropOnRefusal(*token));
  }
  return Status::Unavailable("watch stream: no endpoint could be connected");
}

Result<etcdserverpb::MemberListResponse> Client::MemberList(const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::MemberListResponse>(
      "MemberList", call,
      [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::MemberListResponse* r) {
        return e.cluster->MemberList(c, etcdserverpb::MemberListRequest(), r);
      });
}

Result<etcdserverpb::StatusResponse> Client::EndpointStatus(const CallOptions& call) {
  return impl_->CallIdempotent<etcdserverpb::StatusResponse>(
      "Status", call, [&](Endpoint& e, grpc::ClientContext* c, etcdserverpb::StatusResponse* r) {
        return e.maintenance->Status(c, etcdserverpb::StatusRequest(), r);
      });
}

Result<etcdserverpb::StatusResponse> Client::StatusOf(std::size_t endpoint,
                                                      const CallOptions& call) {
  if (endpoint >= impl_->endpoints.size()) return Status::InvalidArgument("no such endpoint");
  return impl_->StatusOf(endpoint, impl_->DeadlineOf(call), call.stop);
}

Result<etcdserverpb::HashKVResponse> Client::HashKVOf(std::size_t endpoint, std::int64_t revision,
                                                      const CallOptions& call) {
  if (endpoint >= impl_->endpoints.size()) return Status::InvalidArgument("no such endpoint");
  etcdserverpb::HashKVRequest request;
  request.set_revision(revision);
  return impl_->CallOne<etcdserverpb::HashKVResponse>(
      endpoint, "hashkv", impl_->DeadlineOf(call), call.stop, /*with_token=*/true,
      [&request](auto& e, grpc::ClientContext& ctx, auto& response) {
        return e.maintenance->HashKV(&ctx, request, &response);
      });
}

Result<std::size_t> Client::DiscoverLeader(const CallOptions& call) {
  return impl_->DiscoverLeader(impl_->DeadlineOf(call), call.stop);
}

Result<std::optional<mvccpb::KeyValue>> Client::Get(const std::string& key,
                                                    const CallOptions& call) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  Result<etcdserverpb::RangeResponse> response = Range(request, call);
  if (!response.ok()) return response.status();
  if (response->kvs_size() == 0) return std::optional<mvccpb::KeyValue>();
  return std::optional<mvccpb::KeyValue>(response->kvs(0));
}

Result<etcdserverpb::PutResponse> Client::Put(const std::string& key, const std::string& value,
                                              LeaseId lease, const CallOptions& call) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease.value());
  return Put(request, call);
}

std::string PrefixRangeEnd(const std::string& prefix) {
  std::string end = prefix;
  for (std::size_t i = end.size(); i > 0; --i) {
    if (static_cast<unsigned char>(end[i - 1]) < 0xff) {
      end[i - 1] = static_cast<char>(static_cast<unsigned char>(end[i - 1]) + 1);
      end.resize(i);
      return end;
    }
  }
  return std::string(1, '\0');  // no upper bound: every key >= prefix
}

}  // namespace epoch::client
