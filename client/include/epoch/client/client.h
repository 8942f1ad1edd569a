// epoch::client::Client: the etcd v3 API over gRPC, for Epoch clusters and — unchanged — for etcd
// (docs/architecture.md §9). Requests and responses are the etcd wire messages themselves
// (etcdserverpb::RangeRequest, ...), so every field etcd offers is available.
//
// Endpoints and leader discovery. The client holds one channel per endpoint and sends to a
// preferred one. An endpoint that cannot be reached, or that answers "not leader" / "no leader",
// is left for the next one; after a "not leader" answer the client asks the members for their
// Status (leader == header.member_id marks the leader) and prefers the leader's endpoint.
//
// Deadlines and cancellation. Every call has a deadline (CallOptions::timeout, default
// ClientOptions::call_timeout) that covers all its attempts and backoff sleeps, and may carry a
// std::stop_token (e.g. a Session's): a stop request cancels the call in flight.
//
// Retries (docs/etcd-compatibility.md §3.7). Idempotent calls — Range, LeaseRevoke,
// LeaseTimeToLive, LeaseLeases, LeaseKeepAliveOnce, MemberList, EndpointStatus, a Txn without
// writes — are retried on UNAVAILABLE (and the other transient failures of grpc_status.h) with
// exponential backoff and full jitter (Backoff). Put, DeleteRange and Txn go through Epoch's
// epoch.v1.Idempotent service under a key of this client's (a random client id + a sequence
// number per call): a failure that leaves the outcome unknown is retried under the same key
// until the answer is known or the deadline passes, and the server applies the key at most once
// (OutcomeUnknown only when the deadline or a stop cuts it short, or the key's record expired).
// Against a server without that service (etcd answers UNIMPLEMENTED; remembered per Client) they
// go to KV like Compact and LeaseGrant, which are sent again only when the server provably did
// not act on them (the endpoint could not be connected, or it answered "not leader", "no leader"
// or "too many requests"); once sent, any other failure is returned as OutcomeUnknown
// (errors.h), never retried.
//
// Auth. With ClientOptions::user and password the client Authenticates on first use and sends
// the token on every call and stream. A call refused with etcd's invalid-auth-token error (the
// token expired or was revoked) or its old-auth-revision error was not acted on:
// the client authenticates again once and repeats the call, as etcd's Go client does. A stream
// that ends that way, or a watch create cancelled that way, drops the token, so the owner's next
// OpenWatch / OpenKeepAlive authenticates afresh.
//
// Threading: all methods are thread-safe; a Client is meant to be shared. Streams returned by
// OpenKeepAlive / OpenWatch belong to their caller (see streams.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "epoch/client/backoff.h"
#include "epoch/client/streams.h"
#include "epoch/client/tls.h"
#include "epoch/status.h"
#include "epoch/strong_int.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::client {

struct ClientOptions {
  // "127.0.0.1:2379" or "http://127.0.0.1:2379". At least one.
  std::vector<std::string> endpoints;
  // Default deadline of one call, all attempts and backoff included (etcdctl: 5 s).
  std::chrono::milliseconds call_timeout{5000};
  // How long a write waits for an endpoint's connection before trying the next one (etcdctl: 2 s).
  std::chrono::milliseconds dial_timeout{2000};
  // A write sent through epoch.v1.Idempotent: the longest one attempt may take before it is
  // sent again under the same key (the call's deadline still bounds them all).
  std::chrono::milliseconds keyed_attempt_timeout{2000};
  // Retry pacing; max_attempts bounds the attempts of one call (0 = until the deadline).
  BackoffOptions retry{std::chrono::milliseconds(25), std::chrono::milliseconds(1000), 8};
  // Seeds the jitter of every retry loop (each call derives its own stream from it).
  std::uint64_t seed = 0x5eed;
  // HTTP/2 keepalive pings on idle connections. etcd rejects pings more frequent than 5 s
  // (--grpc-keepalive-min-time), answering with GOAWAY too_many_pings
  // (docs/etcd-compatibility.md §5).
  std::chrono::milliseconds keepalive_time{10'000};
  std::chrono::milliseconds keepalive_timeout{5000};
  // Streams carry `hasleader: true` so a member without a leader ends them (clientv3
  // WithRequireLeader) instead of keeping a silent stream open.
  bool streams_require_leader = true;
  // TLS towards every endpoint (tls.h): on with an https:// endpoint or any TLS file.
  TlsOptions tls;
  // etcd auth (etcdctl's --user / --password). With both set, the client Authenticates before
  // its first call and sends the token (gRPC metadata "token") on every call and stream. A user
  // without a password needs a client certificate: the server takes its CN as the user name.
  std::string user;
  std::string password;
};

struct CallOptions {
  // Overrides ClientOptions::call_timeout for this call.
  std::optional<std::chrono::milliseconds> timeout;
  // A stop request cancels the call (in flight or sleeping between attempts).
  std::stop_token stop;
};

class Client {
 public:
  // Validates the options and creates the channels. Does not contact the cluster.
  static Result<std::unique_ptr<Client>> Create(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // --- KV ---
  Result<etcdserverpb::RangeResponse> Range(const etcdserverpb::RangeRequest& request,
                                            const CallOptions& call = {});
  Result<etcdserverpb::PutResponse> Put(const etcdserverpb::PutRequest& request,
                                        const CallOptions& call = {});
  Result<etcdserverpb::DeleteRangeResponse> DeleteRange(
      const etcdserverpb::DeleteRangeRequest& request, const CallOptions& call = {});
  Result<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& request,
                                        const CallOptions& call = {});
  Result<etcdserverpb::CompactionResponse> Compact(const etcdserverpb::CompactionRequest& request,
                                                   const CallOptions& call = {});

  // --- Lease ---
  Result<etcdserverpb::LeaseGrantResponse> LeaseGrant(
      const etcdserverpb::LeaseGrantRequest& request, const CallOptions& call = {});
  // Retried like a read: after a retry, NotFound may mean an earlier attempt did revoke it.
  Result<etcdserverpb::LeaseRevokeResponse> LeaseRevoke(
      const etcdserverpb::LeaseRevokeRequest& request, const CallOptions& call = {});
  Result<etcdserverpb::LeaseTimeToLiveResponse> LeaseTimeToLive(
      const etcdserverpb::LeaseTimeToLiveRequest& request, const CallOptions& call = {});
  Result<etcdserverpb::LeaseLeasesResponse> LeaseLeases(const CallOptions& call = {});
  // One renewal on a short-lived stream (etcdctl lease keep-alive --once). Reply TTL <= 0 means
  // the lease is gone.
  Result<etcdserverpb::LeaseKeepAliveResponse> LeaseKeepAliveOnce(LeaseId lease,
                                                                  const CallOptions& call = {});
  // A long-lived keep-alive stream on the preferred endpoint. `stop` cancels it.
  Result<std::unique_ptr<KeepAliveStream>> OpenKeepAlive(std::stop_token stop = {});

  // --- Watch ---
  Result<std::unique_ptr<WatchStream>> OpenWatch(std::stop_token stop = {});

  // --- Cluster / Maintenance ---
  Result<etcdserverpb::MemberListResponse> MemberList(const CallOptions& call = {});
  // Maintenance.Status of the preferred endpoint (retried on others when it is unreachable).
  Result<etcdserverpb::StatusResponse> EndpointStatus(const CallOptions& call = {});
  // Status of one endpoint (index into endpoints()), no retry — for `endpoint status`.
  Result<etcdserverpb::StatusResponse> StatusOf(std::size_t endpoint, const CallOptions& call = {});
  // Maintenance.HashKV of one endpoint at `revision` (0: the latest), no retry — for
  // `endpoint hashkv`.
  Result<etcdserverpb::HashKVResponse> HashKVOf(std::size_t endpoint, std::int64_t revision,
                                                const CallOptions& call = {});

  // Asks every endpoint for its Status and prefers the one that reports itself leader. Returns
  // its index, or Unavailable when no endpoint knows a leader among the configured endpoints.
  Result<std::size_t> DiscoverLeader(const CallOptions& call = {});

  // --- Conveniences over Range / Put ---
  // The key's current value, or nullopt when absent.
  Result<std::optional<mvccpb::KeyValue>> Get(const std::string& key, const CallOptions& call = {});
  Result<etcdserverpb::PutResponse> Put(const std::string& key, const std::string& value,
                                        LeaseId lease = LeaseId(0), const CallOptions& call = {});

  [[nodiscard]] const std::vector<std::string>& endpoints() const;
  [[nodiscard]] std::size_t preferred_endpoint() const;
  [[nodiscard]] const ClientOptions& options() const;
  // The channel of endpoint `index` (< endpoints().size()), for services this class does not
  // wrap (admin.h, epoch.v1). Callers wait for it to connect themselves.
  [[nodiscard]] std::shared_ptr<grpc::Channel> Channel(std::size_t index) const;

  // --- Auth (ClientOptions::user / password) ---
  // Adds the current token to `context` (nothing without password auth), authenticating first
  // when the client holds none. For calls over Channel() (admin.h); returns the token sent.
  Result<std::string> Authorize(grpc::ClientContext& context, const CallOptions& call = {});
  // After a call sent with `token` was refused as "invalid auth token": forgets that token, so
  // the next Authorize authenticates again. Returns whether a fresh token is worth a retry.
  bool DropToken(const std::string& token);
  // Authenticate calls this client made (successful ones).
  [[nodiscard]] std::uint64_t authentications() const;

  // --- Idempotent writes ---
  // Whether Put, DeleteRange and writing Txns go through epoch.v1.Idempotent (false once a
  // server answered that it does not serve it, e.g. etcd: they go to KV from then on).
  [[nodiscard]] bool idempotent_writes() const;
  // Keyed writes the server answered from its idempotency table: an earlier attempt had applied.
  [[nodiscard]] std::uint64_t replayed_writes() const;

  struct Impl;

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The smallest key greater than every key with `prefix` (etcd's GetPrefixRangeEnd): the last
// byte below 0xff incremented, the rest dropped; "\0" (all keys) when there is none.
std::string PrefixRangeEnd(const std::string& prefix);

}  // namespace epoch::client
