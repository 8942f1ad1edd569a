// epoch_watch_load: the watchers curve's client. Creates N watchers on Watch streams of
// --watchers-per-stream each (clientv3 multiplexes its watchers on one stream the same way), the
// streams round-robin over the endpoints. Then one writer puts at --put-rate, one put at a time,
// and every event received is matched by revision to the put that made it: delivery latency =
// receive time - the put's acknowledgement time (negative when the event beat the reply).
// --mode distinct: watcher i on key PREFIX/w/%08d, each put to a uniformly chosen one; --mode
// prefix: every watcher on PREFIX/p/, so each put reaches all N. --put-clients K adds a closed-loop
// put phase (K in flight) before the watchers exist and again with them: what they cost.
// Prints one JSON line; exits 1 if a watcher was not created or was canceled, a stream erred, a
// put failed, an event came twice or for a wrong key, or one is still missing --grace seconds
// after the last put. Works against etcd and Epoch alike (etcd v3 API).
//
// Threads: --threads completion-queue threads run every Watch stream (gRPC's asynchronous API; a
// stream belongs to one queue, so its state is touched by one thread); the main thread creates the
// streams, writes, samples /proc and prints. The writer publishes each put's acknowledgement
// through an atomic in its PutLog slot; each queue thread's latencies sit behind a mutex that the
// main thread takes to read them.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "epoch/client/tls.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "histogram.h"
#include "load_runner.h"
#include "tls_flags.h"
#include "watch_stream.h"
#include "workload.h"

namespace {

using epoch::bench::LatencyHistogram;
using epoch::bench::watch::Clock;
using epoch::bench::watch::Counters;
using epoch::bench::watch::Deliveries;
using epoch::bench::watch::NowNs;
using epoch::bench::watch::Plan;
using epoch::bench::watch::PutLog;
using epoch::bench::watch::PutSlot;
using epoch::bench::watch::QueuePool;
using epoch::bench::watch::Seconds;
using epoch::bench::watch::WatchStream;

struct Flags {
  std::string endpoints = "127.0.0.1:2379";
  std::int64_t watchers = 1000;
  std::string mode = "distinct";
  std::int64_t per_stream = 1000;
  int conns_per_endpoint = 1;
  int threads = 2;
  double put_rate = 100;
  double window_s = 10;
  double warmup_s = 2;
  double settle_s = 1;
  double create_timeout_s = 120;
  double grace_s = 5;
  std::size_t value_bytes = 256;
  std::string prefix = "scale";
  int put_clients = 0;
  std::uint64_t seed = 1;
  std::vector<int> server_pids;
  epoch::client::TlsOptions tls;
};

struct WriterResult {
  std::int64_t acked = 0;
  std::int64_t measured = 0;
  std::int64_t errors = 0;
  std::string first_error;
  LatencyHistogram latency;  // measured puts, send to reply
  double window_s = 0;
  double server_cpu_s = -1;
  double client_cpu_s = 0;
};

// One put of the writer: its key, and its slot in the log once acknowledged (nullptr: failed).
PutSlot* PutOnce(etcdserverpb::KV::Stub& kv, const Flags& f, const Plan& plan, std::mt19937_64& rng,
                 const std::string& value, WriterResult& r, std::int64_t* sent_ns,
                 std::int64_t* ack_ns) {
  etcdserverpb::PutRequest req;
  req.set_key(plan.prefix_mode ? fmt::format("{}{:016x}", plan.watched_prefix, rng())
                               : plan.WatchedKey(static_cast<std::int64_t>(
                                     rng() % static_cast<std::uint64_t>(f.watchers))));
  req.set_value(value);
  etcdserverpb::PutResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  *sent_ns = NowNs();
  const grpc::Status s = kv.Put(&ctx, req, &resp);
  *ack_ns = NowNs();
  PutSlot* slot = s.ok() ? plan.log->Find(resp.header().revision()) : nullptr;
  if (slot == nullptr && r.errors++ == 0) {
    r.first_error = s.ok() ? fmt::format("revision {} not the writer's: another writer?",
                                         resp.header().revision())
                           : s.error_message();
  }
  return slot;
}

// Puts at f.put_rate, one at a time, for --warmup then --window seconds (at most max_puts); a
// writer that falls behind sends back to back and stops at the end of the window all the same.
WriterResult RunWriter(etcdserverpb::KV::Stub& kv, const Flags& f, const Plan& plan,
                       std::int64_t max_puts) {
  WriterResult r;
  std::mt19937_64 rng(f.seed);
  const std::string value = epoch::bench::RandomValue(f.value_bytes, f.seed);
  const std::vector<int> self = {static_cast<int>(getpid())};
  const auto after = [t0 = Clock::now()](double s) {
    return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  };
  const Clock::time_point w0 = after(f.warmup_s), end = after(f.warmup_s + f.window_s);
  double cpu0 = -1, self0 = 0;
  bool in_window = false;
  for (std::int64_t i = 0; i < max_puts && Clock::now() < end; ++i) {
    std::this_thread::sleep_until(after(static_cast<double>(i) / f.put_rate));
    if (!in_window && Clock::now() >= w0) {
      in_window = true;
      cpu0 = epoch::bench::ProcessesCpuSeconds(f.server_pids);
      self0 = epoch::bench::ProcessesCpuSeconds(self);
    }
    std::int64_t sent_ns = 0, ack_ns = 0;
    PutSlot* slot = PutOnce(kv, f, plan, rng, value, r, &sent_ns, &ack_ns);
    if (slot == nullptr) continue;
    slot->measured = in_window;
    slot->ack_ns.store(ack_ns, std::memory_order_release);
    ++r.acked;
    if (in_window) r.latency.Record(static_cast<std::uint64_t>(ack_ns - sent_ns));
    r.measured += in_window ? 1 : 0;
  }
  r.window_s = Seconds(Clock::now() - w0);
  const double cpu1 = epoch::bench::ProcessesCpuSeconds(f.server_pids);
  r.server_cpu_s = (cpu0 < 0 || cpu1 < 0) ? -1 : cpu1 - cpu0;
  r.client_cpu_s = epoch::bench::ProcessesCpuSeconds(self) - self0;
  return r;
}

// Deliveries still owed to acknowledged puts: 1 per put (distinct) or one per watcher (prefix).
std::int64_t Missing(PutLog& log, std::int64_t per_put, std::int64_t* expected) {
  std::int64_t missing = 0;
  *expected = 0;
  for (PutSlot& s : log.slots()) {
    if (s.ack_ns.load(std::memory_order_acquire) == 0) continue;
    *expected += per_put;
    missing += std::max<std::int64_t>(0, per_put - s.delivered.load(std::memory_order_relaxed));
  }
  return missing;
}

// Signed quantile over early (negated) and late, in ms.
double QuantileMs(const LatencyHistogram& early, const LatencyHistogram& late, double q) {
  const auto ne = static_cast<double>(early.Count()), nl = static_cast<double>(late.Count());
  if (ne + nl == 0) return 0;
  const double rank = std::max(1.0, std::ceil(q * (ne + nl)));  // 1-based, ascending
  if (rank <= ne) return -static_cast<double>(early.ValueAtQuantile((ne - rank + 0.5) / ne)) / 1e6;
  return static_cast<double>(late.ValueAtQuantile((rank - ne - 0.5) / nl)) / 1e6;
}

std::vector<std::int64_t> RssBytes(const std::vector<int>& pids) {
  std::vector<std::int64_t> out;
  for (const int pid : pids) {
    std::ifstream in(fmt::format("/proc/{}/statm", pid));
    std::int64_t size = 0, resident = -1;
    in >> size >> resident;
    out.push_back(resident < 0 ? -1 : resident * sysconf(_SC_PAGESIZE));
  }
  return out;
}

// The highest Raft term among the endpoints (Maintenance.Status), -1 if one does not answer.
std::int64_t MaxRaftTerm(const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  std::int64_t term = 0;
  for (const auto& ch : channels) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    etcdserverpb::StatusResponse resp;
    if (!etcdserverpb::Maintenance::NewStub(ch)->Status(&ctx, {}, &resp).ok()) return -1;
    term = std::max<std::int64_t>(term, static_cast<std::int64_t>(resp.raftterm()));
  }
  return term;
}

// The current revision (header of a Range), -1 on error.
std::int64_t CurrentRevision(etcdserverpb::KV::Stub& kv, const std::string& key) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return kv.Range(&ctx, req, &resp).ok() ? resp.header().revision() : -1;
}

// A closed-loop put phase of f.put_clients (bench/kv's LoadRunner) over `key_count` keys.
std::string Throughput(const Flags& f, epoch::bench::Connections& conns, const std::string& prefix,
                       std::uint64_t key_count, bool* ok) {
  epoch::bench::LoadOptions o;
  o.workload = epoch::bench::Workload::kPut;
  o.clients = f.put_clients;
  o.threads = 2;
  o.warmup = std::chrono::milliseconds(std::llround(f.warmup_s * 1000));
  o.duration = std::chrono::milliseconds(std::llround(f.window_s * 1000));
  o.key_count = key_count;
  o.key_prefix = prefix;
  o.value_size_bytes = f.value_bytes;
  o.seed = f.seed;
  o.server_pids = f.server_pids;
  const epoch::bench::LoadResult r = epoch::bench::RunLoad(o, conns, {});
  *ok = *ok && r.errors == 0 && r.ops > 0;
  return fmt::format(
      "{{\"ops_per_s\": {:.1f}, \"p50_ms\": {:.3f}, \"p99_ms\": {:.3f}, \"errors\": {}, "
      "\"server_cpu_cores\": {:.3f}}}",
      static_cast<double>(r.ops) / r.window_seconds, r.latency.ValueAtQuantile(0.5) / 1e6,
      r.latency.ValueAtQuantile(0.99) / 1e6, r.errors,
      r.server_cpu_seconds < 0 ? -1.0 : r.server_cpu_seconds / r.window_seconds);
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// Appends `"key": value` pairs to one JSON object line.
class JsonLine {
 public:
  template <class T>
  JsonLine& Add(std::string_view key, const T& value) {
    out_ += fmt::format("{}\"{}\": {}", out_.size() > 1 ? ", " : "", key, value);
    return *this;
  }
  JsonLine& Add(std::string_view key, double value) {
    return Add(key, fmt::format("{:.3f}", value));
  }
  std::string str() const { return out_ + "}"; }

 private:
  std::string out_ = "{";
};

// Waits until `done` or `timeout_s` has passed, polling every ms; false on timeout.
template <class Done>
bool WaitFor(Done done, double timeout_s) {
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(timeout_s));
  while (!done()) {
    if (Clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void Sleep(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// One run: the channels, the watch streams and their queue threads, the JSON line being built.
// Member order is the teardown order: the pool joins its threads before the streams go.
class WatchLoad {
 public:
  WatchLoad(const Flags& f, const std::vector<std::string>& endpoints,
            const std::shared_ptr<grpc::ChannelCredentials>& credentials)
      : f_(f), put_conns_(endpoints, 12, credentials), pool_(f.threads) {
    // Watch channels conn-major, so stream s goes to endpoint s % endpoints; each its own TCP
    // connection (a distinct channel argument keeps gRPC from sharing one).
    for (int c = 0; c < f.conns_per_endpoint; ++c) {
      for (const std::string& ep : endpoints) {
        grpc::ChannelArguments args;
        args.SetInt("epoch.watch_load.conn", c);
        args.SetMaxReceiveMessageSize(-1);
        channels_.push_back(grpc::CreateCustomChannel(ep, credentials, args));
        stubs_.push_back(etcdserverpb::Watch::NewStub(channels_.back()));
      }
    }
    // The writer on a connection of its own: no watch stream's events ahead of its replies.
    grpc::ChannelArguments args;
    args.SetInt("epoch.watch_load.writer", 1);
    kv_ = etcdserverpb::KV::NewStub(grpc::CreateCustomChannel(endpoints[0], credentials, args));
    plan_ =
        Plan{f.mode == "prefix", f.prefix, f.prefix + "/p/", f.prefix + "/p0", nullptr, &counters_};
  }

  int Run() {
    json_.Add("mode", JsonString(f_.mode)).Add("watchers", f_.watchers);
    json_.Add("watchers_per_stream", f_.per_stream).Add("put_clients", f_.put_clients);
    const std::int64_t term0 = MaxRaftTerm(channels_);
    if (f_.put_clients > 0) AddThroughput("throughput_without");
    json_.Add("rss_bytes_before", RssBytes(f_.server_pids));
    const std::int64_t base_revision = CurrentRevision(*kv_, f_.prefix);
    if (base_revision < 0) {
      fmt::print(stderr, "Range on the first endpoint failed: no current revision\n");
      return 2;
    }
    log_ = std::make_unique<PutLog>(base_revision, max_puts_);
    plan_.log = log_.get();
    MeasureDeliveries(CreateWatchers());
    if (f_.put_clients > 0) AddThroughput("throughput_with");
    json_.Add("rss_bytes_end", RssBytes(f_.server_pids));
    const std::int64_t term1 = MaxRaftTerm(channels_);
    json_.Add("term_changes", term0 < 0 || term1 < 0 ? -1 : term1 - term0);
    return Finish();
  }

 private:
  bool Failed() const { return counters_.finished > 0; }  // a stream ended before its cancel

  // Opens the streams and waits for every watcher's created answer; true if all came.
  bool CreateWatchers() {
    const Clock::time_point c0 = Clock::now();
    for (std::int64_t first = 0, s = 0; first < f_.watchers; first += f_.per_stream, ++s) {
      const auto q = static_cast<std::size_t>(s % pool_.size());
      streams_.push_back(std::make_unique<WatchStream>(
          *stubs_[static_cast<std::size_t>(s) % stubs_.size()], pool_.queue(q), plan_, first,
          std::min(f_.per_stream, f_.watchers - first), pool_.deliveries()[q]));
    }
    WaitFor([&] { return counters_.created == f_.watchers || Failed(); }, f_.create_timeout_s);
    json_.Add("streams", streams_.size()).Add("created", counters_.created.load());
    json_.Add("create_s", Seconds(Clock::now() - c0));
    Sleep(f_.settle_s);
    json_.Add("rss_bytes_created", RssBytes(f_.server_pids));
    return counters_.created == f_.watchers && !Failed();
  }

  // The writer (if the watchers are all there), --grace for the last events, then the figures.
  void MeasureDeliveries(bool run_writer) {
    const std::int64_t per_put = plan_.prefix_mode ? f_.watchers : 1;
    std::int64_t expected = 0;
    WriterResult w;
    if (run_writer) {
      w = RunWriter(*kv_, f_, plan_, max_puts_);
      WaitFor([&] { return Missing(*log_, per_put, &expected) == 0 || Failed(); }, f_.grace_s);
    }
    log_->Close();
    missing_ = Missing(*log_, per_put, &expected);
    LatencyHistogram early, late;
    for (Deliveries& d : pool_.deliveries()) {
      std::lock_guard lock(d.mu);
      for (const auto& [slot, receive_ns] : d.pending) {
        if (slot->ack_ns.load(std::memory_order_acquire) != 0) d.Record(*slot, receive_ns);
      }
      early.Merge(d.early);
      late.Merge(d.late);
    }
    put_errors_ = w.errors + (w.measured == 0 ? 1 : 0);  // no put in the window: no figures
    const double window_s = std::max(w.window_s, 1e-9);
    const auto delivered = static_cast<double>(early.Count() + late.Count());
    json_.Add("put_rate_target", f_.put_rate).Add("puts", w.acked).Add("put_errors", w.errors);
    json_.Add("put_first_error", JsonString(w.first_error));
    json_.Add("put_rate", static_cast<double>(w.measured) / window_s);
    json_.Add("put_p50_ms", w.latency.ValueAtQuantile(0.5) / 1e6);
    json_.Add("put_p99_ms", w.latency.ValueAtQuantile(0.99) / 1e6);
    json_.Add("deliveries_expected", expected).Add("deliveries_received", expected - missing_);
    json_.Add("missing", missing_).Add("duplicates", counters_.duplicates.load());
    json_.Add("wrong_key", counters_.wrong_key.load()).Add("untracked", counters_.untracked.load());
    json_.Add("delivery_p50_ms", QuantileMs(early, late, 0.5));
    json_.Add("delivery_p99_ms", QuantileMs(early, late, 0.99));
    json_.Add("delivery_max_ms", QuantileMs(early, late, 1.0));
    json_.Add("window_s", w.window_s);
    json_.Add("server_cpu_cores", w.server_cpu_s < 0 ? -1.0 : w.server_cpu_s / window_s);
    json_.Add("server_cpu_us_per_delivery",
              w.server_cpu_s < 0 || delivered == 0 ? -1.0 : w.server_cpu_s * 1e6 / delivered);
    json_.Add("client_cpu_cores", w.client_cpu_s / window_s);
  }

  // Throughput puts go to the watched keys (distinct), or outside the watched prefix (prefix: the
  // watchers cost their registration there; every put to every watcher is the writer's flood).
  void AddThroughput(std::string_view name) {
    const bool prefix = plan_.prefix_mode;
    json_.Add(name, Throughput(f_, put_conns_, f_.prefix + (prefix ? "/t/" : "/w/"),
                               static_cast<std::uint64_t>(prefix ? 1000 : f_.watchers), &ok_));
  }

  // Cancels every stream, waits (bounded) for their ends, prints the line; the exit status.
  int Finish() {
    for (auto& s : streams_) s->Cancel();
    const bool finished = WaitFor([&] { return counters_.finished == std::ssize(streams_); }, 10);
    if (!finished) counters_.Error("streams did not finish within 10 s of their cancel");
    ok_ = ok_ && counters_.created == f_.watchers && put_errors_ == 0 && missing_ == 0 &&
          counters_.duplicates == 0 && counters_.wrong_key == 0;
    {
      std::lock_guard lock(counters_.mu);
      std::vector<std::string> quoted;
      for (const std::string& e : counters_.stream_errors) quoted.push_back(JsonString(e));
      json_.Add("stream_errors", fmt::format("[{}]", fmt::join(quoted, ", ")));
      ok_ = ok_ && counters_.stream_errors.empty();
    }
    fmt::print("{}\n", json_.Add("ok", ok_).str());
    std::fflush(stdout);
    if (!finished) _exit(1);  // a stream still has operations queued: no clean teardown
    pool_.Shutdown();
    return ok_ ? 0 : 1;
  }

  const Flags& f_;
  const std::int64_t max_puts_ =
      std::llround(f_.put_rate * (f_.warmup_s + f_.window_s)) + 1;  // the writer's log capacity
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<etcdserverpb::Watch::Stub>> stubs_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  epoch::bench::Connections put_conns_;
  JsonLine json_;
  bool ok_ = true;
  std::int64_t missing_ = 0;
  std::int64_t put_errors_ = 0;
  Counters counters_;
  std::unique_ptr<PutLog> log_;
  Plan plan_;
  std::vector<std::unique_ptr<WatchStream>> streams_;
  QueuePool pool_;
};

int Run(const Flags& f) {
  const std::vector<std::string> endpoints = epoch::bench::SplitEndpoints(f.endpoints);
  auto credentials = epoch::client::ChannelCredentials(f.tls, endpoints);
  if (!credentials.ok() || endpoints.empty()) {
    fmt::print(stderr, "{}\n", credentials.ok() ? "no endpoint" : credentials.status().ToString());
    return 2;
  }
  WatchLoad load(f, endpoints, *credentials);
  return load.Run();
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"epoch_watch_load: N watchers, puts at a fixed rate, delivery latency (etcd v3)"};
  app.add_option("--endpoints", f.endpoints, "Comma-separated host:port list (http:// allowed)");
  app.add_option("--watchers", f.watchers, "Watchers to create")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{10'000'000}));
  app.add_option("--mode", f.mode, "distinct: one key per watcher; prefix: all on one prefix")
      ->check(CLI::IsMember({"distinct", "prefix"}));
  app.add_option("--watchers-per-stream", f.per_stream, "Watchers multiplexed on one Watch stream")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000}));
  app.add_option("--conns", f.conns_per_endpoint, "gRPC connections per endpoint")
      ->check(CLI::Range(1, 64));
  app.add_option("--threads", f.threads, "Completion-queue threads reading the streams")
      ->check(CLI::Range(1, 64));
  app.add_option("--put-rate", f.put_rate, "Puts per second of the writer (one at a time)")
      ->check(CLI::Range(0.1, 100'000.0));
  app.add_option("--window", f.window_s, "Measured seconds")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--warmup", f.warmup_s, "Seconds of puts before the window")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--settle", f.settle_s, "Seconds between creating the watchers and RSS")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--create-timeout", f.create_timeout_s, "Seconds allowed to create the watchers")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--grace", f.grace_s, "Seconds after the last put for its events to arrive")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--value-bytes", f.value_bytes, "Bytes per put value")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20));
  app.add_option("--prefix", f.prefix, "Key prefix (keys PREFIX/w/..., PREFIX/p/...)");
  app.add_option("--put-clients", f.put_clients,
                 "Closed-loop put phase with this many in flight, without and with the watchers "
                 "(0: none)")
      ->check(CLI::Range(0, 100'000));
  app.add_option("--seed", f.seed, "Seed of the writer's key choice");
  app.add_option("--server-pids", f.server_pids, "PIDs whose CPU and RSS are sampled");
  epoch::bench::AddTlsFlags(app, &f.tls);
  CLI11_PARSE(app, argc, argv);
  if (f.put_rate * (f.warmup_s + f.window_s) > 10'000'000) {
    fmt::print(stderr, "--put-rate x (--warmup + --window) must stay under 10M puts\n");
    return 2;
  }
  return Run(f);
}
