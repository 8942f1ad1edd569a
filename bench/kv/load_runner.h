// LoadRunner: drives a closed-loop load against etcd v3 KV endpoints with few threads.
//
// Model: `clients` independent closed-loop clients, each with at most one request outstanding;
// client c sends on connection c % connections (connections are spread round-robin over the
// endpoints) and is served by thread c % threads. Each thread owns one gRPC CompletionQueue and
// polls it; every RPC is asynchronous, so 1,024 clients need no more threads than cores. A phase
// either runs for a time window (the measured run: warm-up, then `duration`; only operations that
// complete inside the window count) or until every key has been written once (prefill).
//
// Callers: epoch_bench's main, from one thread. Run* block until the phase is over and every
// in-flight RPC has completed or hit its deadline; they start and join their own threads.
#pragma once

#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "histogram.h"
#include "workload.h"

namespace epoch::bench {

struct LoadOptions {
  Workload workload = Workload::kGet;
  std::vector<std::string> endpoints;  // host:port, at least one
  int clients = 1;                     // concurrent outstanding requests
  int connections = 1;                 // gRPC channels (TCP connections)
  int threads = 1;                     // completion-queue threads
  std::chrono::milliseconds warmup{1000};
  std::chrono::milliseconds duration{5000};
  std::chrono::milliseconds rpc_timeout{5000};
  std::chrono::milliseconds error_backoff{10};  // pause of a client after a failed request
  std::uint64_t key_count = 1000;
  std::string key_prefix = "bench/";
  std::size_t value_size_bytes = 256;
  std::uint64_t seed = 1;
  // Local server processes whose CPU time (user + sys, from /proc) is sampled at the start and the
  // end of the measured window, to report server CPU per operation. May be empty.
  std::vector<int> server_pids;
  // An auth token (Auth.Authenticate) sent as etcd's "token" metadata on every call; empty: none.
  std::string token;
};

struct ErrorSample {
  std::uint64_t count = 0;
  std::string first_message;
};

struct LoadResult {
  LatencyHistogram latency;                   // successful operations completed inside the window
  std::uint64_t ops = 0;                      // == latency.Count()
  std::uint64_t errors = 0;                   // failed RPCs completed inside the window
  std::map<int, ErrorSample> errors_by_code;  // gRPC status code -> count, first message
  std::uint64_t cas_succeeded = 0;            // CAS workloads: Txn took its success branch
  std::uint64_t cas_failed = 0;               // ... its failure branch (still a served op)
  std::uint64_t malformed_replies = 0;        // replies that break the etcd contract
  double window_seconds = 0;
  // CPU time (user + sys) used inside the window (the whole phase for prefill) by this process
  // and by LoadOptions::server_pids together; server_cpu_seconds < 0 if it could not be read.
  double client_cpu_seconds = 0;
  double server_cpu_seconds = -1;
};

// User + sys CPU seconds of the processes `pids` so far (from /proc/<pid>/stat); -1 if any of
// them cannot be read.
double ProcessesCpuSeconds(const std::vector<int>& pids);

// "host:port,http://host:port,..." as host:port entries (an http:// or https:// scheme dropped,
// empty entries skipped).
std::vector<std::string> SplitEndpoints(const std::string& csv);

// The gRPC channels and stubs, one per connection, created once for all phases.
class Connections {
 public:
  // Opens `count` channels spread round-robin over `endpoints`; each gets its own TCP connection
  // (a local subchannel pool, so gRPC does not share one connection between equal channels).
  // `credentials`: plaintext or TLS (epoch::client::ChannelCredentials).
  Connections(const std::vector<std::string>& endpoints, int count,
              const std::shared_ptr<grpc::ChannelCredentials>& credentials);
  // Waits until every channel is connected; false (with the endpoint in *failed) on timeout.
  bool WaitConnected(std::chrono::milliseconds timeout, std::string* failed);
  int size() const { return static_cast<int>(stubs_.size()); }
  etcdserverpb::KV::Stub* stub(int i) const { return stubs_[i].get(); }

 private:
  std::vector<std::string> targets_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> stubs_;
};

// Puts every key once (value EncodeCasValue(0, value size)), with opts.clients in flight.
// Returns each key's mod revision after its put (0 where the put failed), in *mod_revisions.
LoadResult RunPrefill(const LoadOptions& opts, Connections& conns,
                      std::vector<std::int64_t>* mod_revisions);

// The measured run. `mod_revisions` (from RunPrefill, may be empty) seeds the CAS caches.
LoadResult RunLoad(const LoadOptions& opts, Connections& conns,
                   const std::vector<std::int64_t>& mod_revisions);

}  // namespace epoch::bench
