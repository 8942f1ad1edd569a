// epoch_lease_load: grants N leases and keeps every one alive as clientv3 does (one
// LeaseKeepAliveRequest per lease every TTL/3), on LeaseKeepAlive streams of --per-stream leases
// spread over the endpoints, each stream's requests paced evenly over the period. After one
// period of warm-up it counts, for --window seconds, the keep-alive answers and the servers' CPU
// (--server-pids), and prints one JSON line. Works against etcd and Epoch alike (etcd v3 API).
//
// Threads: --grant-threads blocking LeaseGrant callers, then two per stream (a pacing writer
// and a reader); the counters are atomics, the stream errors a mutex-guarded list.
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "epoch/client/tls.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "load_runner.h"
#include "tls_flags.h"

namespace {

using Clock = std::chrono::steady_clock;
using epoch::bench::ProcessesCpuSeconds;
using epoch::bench::SplitEndpoints;

struct Flags {
  std::string endpoints = "127.0.0.1:2379";
  std::int64_t leases = 1000;
  std::int64_t ttl_s = 10;
  std::int64_t per_stream = 2000;
  int grant_threads = 128;
  int conns_per_endpoint = 2;
  double window_s = 10;
  double warmup_s = -1;  // < 0: one renewal period
  std::vector<int> server_pids;
  epoch::client::TlsOptions tls;
};

// What the keep-alive streams saw; shared by every stream's reader.
struct Counters {
  std::atomic<std::int64_t> answered{0};
  std::atomic<std::int64_t> expired{0};  // answers with TTL <= 0: the lease was gone
  std::atomic<std::int64_t> sent{0};
  std::mutex mu;
  std::vector<std::string> stream_errors;  // guarded by mu
};

// Grants `count` leases over `channels` with `threads` callers; returns the IDs granted.
std::vector<std::int64_t> GrantAll(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                                   std::int64_t count, std::int64_t ttl_s, int threads,
                                   std::int64_t* errors) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(count), 0);
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> failed{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto stub = etcdserverpb::Lease::NewStub(channels[t % channels.size()]);
      for (std::int64_t i = next++; i < count; i = next++) {
        etcdserverpb::LeaseGrantRequest req;
        req.set_ttl(ttl_s);
        etcdserverpb::LeaseGrantResponse resp;
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        if (stub->LeaseGrant(&ctx, req, &resp).ok() && resp.id() != 0) {
          ids[static_cast<std::size_t>(i)] = resp.id();
        } else {
          ++failed;
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  *errors = failed.load();
  std::erase(ids, 0);
  return ids;
}

// One LeaseKeepAlive stream renewing `ids`, each once per `period`, until `stop`.
class KeepAliveStream {
 public:
  KeepAliveStream(const std::shared_ptr<grpc::Channel>& channel, std::vector<std::int64_t> ids,
                  Clock::duration period, Counters& counters)
      : stub_(etcdserverpb::Lease::NewStub(channel)),
        ids_(std::move(ids)),
        period_(period),
        counters_(counters) {
    stream_ = stub_->LeaseKeepAlive(&ctx_);
    reader_ = std::thread([this] { Read(); });
    writer_ = std::thread([this] { Write(); });
  }

  void Stop() {
    stop_ = true;
    writer_.join();
    ctx_.TryCancel();
    reader_.join();
  }

 private:
  void Write() {
    const Clock::time_point start = Clock::now();
    const auto gap = period_ / static_cast<std::int64_t>(ids_.size());
    std::size_t k = 0;
    etcdserverpb::LeaseKeepAliveRequest req;
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      // Everything due by now, then sleep at least 1 ms: a few wake-ups per stream and ms.
      for (; start + gap * static_cast<std::int64_t>(k) <= now && !stop_; ++k) {
        req.set_id(ids_[k % ids_.size()]);
        if (!stream_->Write(req)) return;  // the stream ended; the reader records why
        ++counters_.sent;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    stream_->WritesDone();
  }

  void Read() {
    etcdserverpb::LeaseKeepAliveResponse resp;
    while (stream_->Read(&resp)) {
      ++counters_.answered;
      if (resp.ttl() <= 0) ++counters_.expired;
    }
    grpc::Status s = stream_->Finish();
    if (!stop_ && s.error_code() != grpc::StatusCode::CANCELLED) {
      std::lock_guard lock(counters_.mu);
      counters_.stream_errors.push_back(
          fmt::format("{}: {}", static_cast<int>(s.error_code()), s.error_message()));
    }
  }

  std::unique_ptr<etcdserverpb::Lease::Stub> stub_;
  std::vector<std::int64_t> ids_;
  Clock::duration period_;
  Counters& counters_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                           etcdserverpb::LeaseKeepAliveResponse>>
      stream_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
  std::thread writer_;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string JsonList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& s : items) {
    std::string escaped;
    for (char c : s) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    out += fmt::format("{}\"{}\"", out.size() > 1 ? "," : "", escaped);
  }
  return out + "]";
}

int Run(const Flags& f) {
  const std::vector<std::string> endpoints = SplitEndpoints(f.endpoints);
  auto credentials = epoch::client::ChannelCredentials(f.tls, endpoints);
  if (!credentials.ok()) {
    fmt::print(stderr, "{}\n", credentials.status().ToString());
    return 2;
  }
  // Several HTTP/2 connections per endpoint: a distinct channel argument keeps gRPC from sharing
  // one subchannel between them.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const std::string& ep : endpoints) {
    for (int c = 0; c < f.conns_per_endpoint; ++c) {
      grpc::ChannelArguments args;
      args.SetInt("epoch.lease_load.conn", c);
      channels.push_back(grpc::CreateCustomChannel(ep, *credentials, args));
    }
  }
  const Clock::time_point grant_start = Clock::now();
  std::int64_t grant_errors = 0;
  const std::vector<std::int64_t> ids =
      GrantAll(channels, f.leases, f.ttl_s, f.grant_threads, &grant_errors);
  const double grant_s = Seconds(Clock::now() - grant_start);

  const auto period =
      std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(f.ttl_s)) / 3;
  Counters counters;
  std::vector<std::unique_ptr<KeepAliveStream>> streams;
  for (std::size_t first = 0, s = 0; first < ids.size(); first += f.per_stream, ++s) {
    const std::size_t last = std::min(ids.size(), first + static_cast<std::size_t>(f.per_stream));
    streams.push_back(std::make_unique<KeepAliveStream>(
        channels[s % channels.size()],
        std::vector<std::int64_t>(ids.begin() + first, ids.begin() + last), period, counters));
  }
  const double warmup_s = f.warmup_s >= 0 ? f.warmup_s : Seconds(period);
  std::this_thread::sleep_for(std::chrono::duration<double>(warmup_s));
  const std::int64_t a0 = counters.answered;
  const double c0 = ProcessesCpuSeconds(f.server_pids);
  const Clock::time_point w0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(f.window_s));
  const std::int64_t a1 = counters.answered;
  const double c1 = ProcessesCpuSeconds(f.server_pids);
  const double window = Seconds(Clock::now() - w0);
  for (auto& s : streams) s->Stop();

  const double renewals_per_s = static_cast<double>(a1 - a0) / window;
  const double cpu = (c0 < 0 || c1 < 0) ? -1 : c1 - c0;
  std::lock_guard lock(counters.mu);
  fmt::print(
      "{{\"leases\": {}, \"granted\": {}, \"grant_errors\": {}, \"grant_per_s\": {:.1f}, "
      "\"ttl_s\": {}, \"streams\": {}, \"renewals_needed_per_s\": {:.1f}, "
      "\"renewals_per_s\": {:.1f}, \"server_cpu_cores\": {:.3f}, "
      "\"server_cpu_us_per_renewal\": {:.1f}, \"expired_answers\": {}, \"sent\": {}, "
      "\"stream_errors\": {}}}\n",
      f.leases, ids.size(), grant_errors, static_cast<double>(ids.size()) / grant_s, f.ttl_s,
      streams.size(), static_cast<double>(ids.size()) / Seconds(period), renewals_per_s,
      cpu < 0 ? -1.0 : cpu / window, (cpu < 0 || a1 == a0) ? -1.0 : cpu * 1e6 / (a1 - a0),
      counters.expired.load(), counters.sent.load(), JsonList(counters.stream_errors));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"epoch_lease_load: N leases kept alive over LeaseKeepAlive streams (etcd v3 API)"};
  app.add_option("--endpoints", f.endpoints, "Comma-separated host:port list (http:// allowed)");
  app.add_option("--leases", f.leases, "Leases to grant and keep alive")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000'000}));
  app.add_option("--ttl", f.ttl_s, "Lease TTL, seconds; each is renewed every TTL/3")
      ->check(CLI::Range(std::int64_t{3}, std::int64_t{3600}));
  app.add_option("--per-stream", f.per_stream, "Leases per LeaseKeepAlive stream")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--grant-threads", f.grant_threads, "Concurrent LeaseGrant callers")
      ->check(CLI::Range(1, 1024));
  app.add_option("--conns", f.conns_per_endpoint, "gRPC connections per endpoint")
      ->check(CLI::Range(1, 64));
  app.add_option("--window", f.window_s, "Measured seconds")->check(CLI::Range(0.1, 7200.0));
  app.add_option("--warmup", f.warmup_s,
                 "Seconds of keep-alives before measuring (default: TTL/3)");
  app.add_option("--server-pids", f.server_pids, "PIDs whose CPU time the window counts");
  epoch::bench::AddTlsFlags(app, &f.tls);
  CLI11_PARSE(app, argc, argv);
  return Run(f);
}
