// epoch_bench: a closed-loop load generator for the etcd v3 KV API (Epoch or etcd).
//
//   epoch_bench --endpoints 127.0.0.1:2379,127.0.0.1:2389 --workload get --clients 256
//               --conns 12 --duration 8 --warmup 2 [--target leader] [--json]
//
// Phases: connect every channel; prefill (put every key once, unless --no-prefill); the measured
// run (warm-up, then the window). Prints a human report (stderr with --json) and, with --json, one
// JSON line on stdout. Exit status 0 on a run without errors, 1 when any RPC failed, 2 on bad flags
// or when the cluster could not be reached.
#include <absl/synchronization/mutex.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "epoch/client/tls.h"
#include "epoch/status.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "load_runner.h"
#include "report.h"
#include "tls_flags.h"
#include "workload.h"

namespace epoch::bench {
namespace {

struct Flags {
  std::string endpoints = "127.0.0.1:2379";
  std::string workload = "get";
  std::string target = "all";
  std::string label;
  double duration_s = 5;
  double warmup_s = 1;
  double rpc_timeout_s = 5;
  bool no_prefill = false;
  bool json = false;
  bool mutex_deadlock_detection = false;
  client::TlsOptions tls;  // etcdctl's --cacert, --cert, --key, --insecure-skip-tls-verify
  std::string user;        // etcdctl's --user name:password; empty: no auth
};

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// The endpoint whose member is the Raft leader, by Maintenance.Status (leader == member_id),
// which both etcd and Epoch serve.
Result<std::string> FindLeader(const std::vector<std::string>& endpoints,
                               const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  std::string errors;
  for (const std::string& ep : endpoints) {
    auto stub = etcdserverpb::Maintenance::NewStub(grpc::CreateChannel(ep, credentials));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    etcdserverpb::StatusResponse resp;
    const grpc::Status s = stub->Status(&ctx, etcdserverpb::StatusRequest(), &resp);
    if (!s.ok()) {
      errors += fmt::format(" {}: {};", ep, s.error_message());
      continue;
    }
    if (resp.leader() != 0 && resp.leader() == resp.header().member_id()) return ep;
  }
  return Status::Unavailable("no endpoint reports itself as leader;" + errors);
}

// A token for `user` ("name:password", as etcdctl's --user) from Auth.Authenticate on `endpoint`.
Result<std::string> Authenticate(const std::string& endpoint, const std::string& user,
                                 const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  const std::size_t colon = user.find(':');
  if (colon == std::string::npos) return Status::InvalidArgument("--user takes name:password");
  auto stub = etcdserverpb::Auth::NewStub(grpc::CreateChannel(endpoint, credentials));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  etcdserverpb::AuthenticateRequest req;
  req.set_name(user.substr(0, colon));
  req.set_password(user.substr(colon + 1));
  etcdserverpb::AuthenticateResponse resp;
  const grpc::Status s = stub->Authenticate(&ctx, req, &resp);
  if (!s.ok()) return Status::Unavailable(fmt::format("authenticate: {}", s.error_message()));
  return resp.token();
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

void AddFlags(CLI::App& app, Flags& f, LoadOptions& o) {
  app.add_option("--endpoints", f.endpoints, "Comma-separated host:port list (http:// allowed)");
  app.add_option("--workload", f.workload, fmt::format("One of: {}", WorkloadNames()));
  app.add_option("--clients", o.clients, "Concurrent outstanding requests")
      ->check(CLI::Range(1, 65536));
  app.add_option("--conns", o.connections, "gRPC connections, spread round-robin over endpoints")
      ->check(CLI::Range(1, 4096));
  app.add_option("--threads", o.threads, "Completion-queue threads of this client")
      ->check(CLI::Range(1, 64));
  app.add_option("--duration", f.duration_s, "Measured seconds")->check(CLI::Range(0.1, 600.0));
  app.add_option("--warmup", f.warmup_s, "Seconds of load before measuring")
      ->check(CLI::Range(0.0, 120.0));
  app.add_option("--rpc-timeout", f.rpc_timeout_s, "Per-request deadline, seconds")
      ->check(CLI::Range(0.01, 60.0));
  app.add_option("--keys", o.key_count, "Number of distinct keys (uniformly chosen)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{10'000'000}));
  app.add_option("--key-prefix", o.key_prefix, "Prefix of every key");
  // Up to 1.5 MiB, etcd's default --max-request-bytes: the scale suite puts 1 MiB values.
  app.add_option("--value-size", o.value_size_bytes, "Value size in bytes (>= 16 for CAS)")
      ->check(CLI::Range(std::size_t{0}, std::size_t{1536 * 1024}));
  app.add_option("--target", f.target, "all: every endpoint; leader: only the Raft leader's")
      ->check(CLI::IsMember({"all", "leader"}));
  app.add_option("--seed", o.seed, "Seed of key choice and values");
  app.add_option("--label", f.label, "Free text echoed in the output");
  app.add_option("--server-pids", o.server_pids,
                 "Comma-separated PIDs of local servers: report their CPU per operation")
      ->delimiter(',');
  epoch::bench::AddTlsFlags(app, &f.tls);
  app.add_option("--user", f.user,
                 "Auth: name:password; the token goes on every call (etcd's \"token\" metadata)");
  app.add_flag("--no-prefill", f.no_prefill, "Do not put every key before the run");
  app.add_flag("--mutex-deadlock-detection", f.mutex_deadlock_detection,
               "Leave Abseil's mutex deadlock detection on (Debian's build has it on; it costs "
               "client CPU on every gRPC lock)");
  app.add_flag("--json", f.json, "One JSON line on stdout (the human report goes to stderr)");
}

int Main(int argc, char** argv) {
  CLI::App app{"epoch_bench: etcd v3 KV load generator (put, get, serializable get, txn CAS)"};
  Flags f;
  LoadOptions o;
  AddFlags(app, f, o);
  CLI11_PARSE(app, argc, argv);
  if (!f.mutex_deadlock_detection) {
    // gRPC's locks are absl::Mutex; Debian's Abseil checks every acquisition against a global
    // lock-order graph (GraphCycles in profiles). A load generator has no use for that.
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }

  const std::optional<Workload> w = ParseWorkload(f.workload);
  if (!w) {
    fmt::print(stderr, "unknown --workload '{}'; one of: {}\n", f.workload, WorkloadNames());
    return 2;
  }
  o.workload = *w;
  o.warmup = Millis(f.warmup_s);
  o.duration = Millis(f.duration_s);
  o.rpc_timeout = Millis(f.rpc_timeout_s);
  if (IsCas(o.workload) && o.value_size_bytes < 16) o.value_size_bytes = 16;
  std::vector<std::string> endpoints = SplitEndpoints(f.endpoints);
  if (endpoints.empty()) {
    fmt::print(stderr, "--endpoints is empty\n");
    return 2;
  }
  // TLS with any TLS flag, or when an endpoint is https://.
  f.tls.enabled = f.tls.insecure_skip_verify || f.endpoints.find("https://") != std::string::npos;
  Result<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      client::ChannelCredentials(f.tls, endpoints);
  if (!credentials.ok()) {
    fmt::print(stderr, "{}\n", credentials.status().ToString());
    return 2;
  }
  if (f.target == "leader") {
    Result<std::string> leader = FindLeader(endpoints, *credentials);
    if (!leader.ok()) {
      fmt::print(stderr, "{}\n", leader.status().ToString());
      return 2;
    }
    endpoints = {*leader};
  }
  o.endpoints = endpoints;
  if (!f.user.empty()) {
    Result<std::string> token = Authenticate(endpoints.front(), f.user, *credentials);
    if (!token.ok()) {
      fmt::print(stderr, "{}\n", token.status().ToString());
      return 2;
    }
    o.token = *token;
  }
  const RunDescription desc{f.label, f.target, Join(endpoints)};
  std::FILE* human = f.json ? stderr : stdout;

  Connections conns(endpoints, o.connections, *credentials);
  std::string failed;
  if (!conns.WaitConnected(std::chrono::seconds(10), &failed)) {
    fmt::print(stderr, "could not connect to {} within 10 s\n", failed);
    return 2;
  }
  std::vector<std::int64_t> mod_revisions;
  if (!f.no_prefill) {
    LoadResult p = RunPrefill(o, conns, &mod_revisions);
    fmt::print(human, "prefill: {} keys in {:.2f} s, errors {}\n", p.ops, p.window_seconds,
               p.errors);
    if (p.errors > 0) {
      for (const auto& [code, e] : p.errors_by_code) {
        fmt::print(stderr, "prefill error code {}: {} times, first: {}\n", code, e.count,
                   e.first_message);
      }
      return 2;
    }
  }
  const LoadResult r = RunLoad(o, conns, mod_revisions);
  fmt::print(human, "{}", HumanReport(o, desc, r));
  if (f.json) fmt::print("{}\n", JsonReport(o, desc, r));
  std::fflush(stdout);
  return r.errors == 0 && r.malformed_replies == 0 ? 0 : 1;
}

}  // namespace
}  // namespace epoch::bench

int main(int argc, char** argv) { return epoch::bench::Main(argc, argv); }
