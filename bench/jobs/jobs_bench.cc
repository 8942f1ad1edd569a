// epoch_jobs_bench: fenced job leases through the server's Jobs service (EpochJobLeases) against
// the client-side recipe on the KV API (RecipeJobLeases), in one run on one 3-member cluster.
//
//   throughput  `--workers` threads (64), each with its own lease, take a random job of `--jobs`,
//               release it at once (not completed, so it stays queued) and go on, for
//               `--seconds`. Prints acquisitions per second, refusals (busy) and errors.
//   handoff     `--handoffs` jobs at once: a holder takes each job on a `--ttl-s` lease that it
//               never renews; a successor with a live lease tries the job every `--poll-ms` and,
//               once it has it, makes its first fenced commit (SQLite FencedUpdate with its token).
//               A watch on the lock keys timestamps the expired holder's key deletion (the lease's
//               expiry as the cluster applied it). Prints p50 and p99 of expiry → fenced commit.
//
// Both modes use the same cluster, the same threads and polling, one mode after the other (the
// recipe first, then the API, unless --api-first). Bounded: every phase ends after its time, every
// call has a deadline. Nothing is judged: it prints numbers.
#include <fmt/format.h>
#include <sqlite3.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/job_leases.h"
#include "epoch/client/job_recipe_leases.h"
#include "epoch/client/sqlite_fencing.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"

namespace epoch::bench {
namespace {

using client::Client;
using client::JobLeases;
using client::JobLeasesOptions;
using client::JobSpec;
using Clock = std::chrono::steady_clock;

struct Options {
  int workers = 64;
  int jobs = 256;
  int seconds = 5;
  int handoffs = 20;
  int ttl_s = 2;
  int poll_ms = 10;
  int clients = 8;
  bool api_first = false;
};

enum class Mode { kRecipe, kApi };
std::string_view ModeName(Mode m) { return m == Mode::kApi ? "server API" : "client recipe"; }

// A worker's lease that is never lost (the phases are shorter than its TTL).
class FixedSession final : public client::WorkerSession {
 public:
  explicit FixedSession(LeaseId lease) : lease_(lease) {}
  [[nodiscard]] LeaseId lease() const override { return lease_; }
  [[nodiscard]] bool CanTakeNewWork() const override { return true; }
  [[nodiscard]] std::stop_token stop_token() const override { return source_.get_token(); }

 private:
  LeaseId lease_;
  std::stop_source source_;
};

std::unique_ptr<JobLeases> LeasesFor(Mode mode, Client* client, const std::string& prefix) {
  JobLeasesOptions options{.keys = client::JobKeys{prefix},
                           .max_epoch_changes = 1'000'000,
                           .call_timeout = std::chrono::milliseconds(5000),
                           .holder = "bench"};
  if (mode == Mode::kApi) return std::make_unique<client::EpochJobLeases>(client, options);
  return std::make_unique<client::RecipeJobLeases>(client, options);
}

LeaseId Grant(Client& client, std::int64_t ttl_s) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  auto granted = client.LeaseGrant(request);
  if (!granted.ok()) throw std::runtime_error("lease grant: " + granted.status().ToString());
  return LeaseId(granted->id());
}

std::vector<JobSpec> Enqueue(Client& client, const std::string& prefix, const std::string& tag,
                             int n) {
  std::vector<JobSpec> jobs;
  for (int i = 0; i < n; ++i) {
    const std::string id = fmt::format("{}{}", tag, i);
    const std::string value = client::EncodeJob({"only"}, "bench");
    if (!client.Put(client::JobKeys{prefix}.Job(id), value).ok()) {
      throw std::runtime_error("enqueue " + id);
    }
    jobs.push_back(*client::ParseJob(id, value));
  }
  return jobs;
}

struct Throughput {
  std::uint64_t acquired = 0, busy = 0, errors = 0;
  double seconds = 0;
};

Throughput RunThroughput(Mode mode, const std::vector<std::unique_ptr<Client>>& clients,
                         const Options& o, const std::string& prefix) {
  const std::vector<JobSpec> jobs = Enqueue(*clients[0], prefix, "t", o.jobs);
  std::atomic<std::uint64_t> acquired{0}, busy{0}, errors{0};
  std::vector<LeaseId> leases;
  for (int w = 0; w < o.workers; ++w) leases.push_back(Grant(*clients[0], 60));
  const auto start = Clock::now();
  const auto end = start + std::chrono::seconds(o.seconds);
  std::vector<std::thread> threads;
  for (int w = 0; w < o.workers; ++w) {
    threads.emplace_back([&, w] {
      Client* c = clients[w % clients.size()].get();
      auto job_leases = LeasesFor(mode, c, prefix);
      FixedSession session(leases[w]);
      std::mt19937 rng(static_cast<std::uint32_t>(w + 1));
      std::uniform_int_distribution<std::size_t> pick(0, jobs.size() - 1);
      while (Clock::now() < end) {
        auto got = job_leases->TryAcquire(jobs[pick(rng)], session);
        if (!got.ok()) {
          errors.fetch_add(1);
        } else if (!got->has_value()) {
          busy.fetch_add(1);
        } else {
          acquired.fetch_add(1);
          (void)job_leases->Release(**got, session);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return {acquired.load(), busy.load(), errors.load(),
          std::chrono::duration<double>(Clock::now() - start).count()};
}

// The times the lock keys under `lock_root` were deleted, by key, seen through one watch.
class DeleteClock {
 public:
  DeleteClock(Client& client, const std::string& lock_root) {
    auto stream = client.OpenWatch(stop_.get_token());
    if (!stream.ok()) throw std::runtime_error("watch: " + stream.status().ToString());
    stream_ = std::move(*stream);
    etcdserverpb::WatchCreateRequest create;
    create.set_key(lock_root);
    create.set_range_end(client::PrefixRangeEnd(lock_root));
    create.add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
    if (!stream_->Create(create).ok()) throw std::runtime_error("watch create");
    reader_ = std::thread([this] {
      while (true) {
        auto response = stream_->Receive();
        if (!response.ok()) return;
        const auto now = Clock::now();
        std::lock_guard lock(mu_);
        for (const auto& e : response->events()) deleted_.emplace(e.kv().key(), now);
      }
    });
  }
  ~DeleteClock() {
    stop_.request_stop();
    reader_.join();
  }
  std::optional<Clock::time_point> DeletedAt(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = deleted_.find(key);
    if (it == deleted_.end()) return std::nullopt;
    return it->second;
  }

 private:
  std::stop_source stop_;
  std::unique_ptr<client::WatchStream> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::map<std::string, Clock::time_point> deleted_;  // guarded by mu_
};

// One SQLite file; each successor opens its own connection.
struct FencedDb {
  explicit FencedDb(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) throw std::runtime_error("sqlite open");
    sqlite3_busy_timeout(db, 10'000);
    store = std::make_unique<client::SqliteFencedStore>(db);
    if (!store->CreateTable().ok()) throw std::runtime_error("sqlite create table");
  }
  ~FencedDb() {
    store.reset();
    sqlite3_close(db);
  }
  bool Commit(const std::string& job, FencingToken token) {
    if (!store->RegisterJob(job).ok() || !store->Begin().ok()) return false;
    client::FencedWriteResult r = store->FencedUpdate({job, 1, "only", token, "done", "bench"});
    if (!r.applied()) {
      (void)store->Rollback();
      return false;
    }
    return store->Commit().ok();
  }
  sqlite3* db = nullptr;
  std::unique_ptr<client::SqliteFencedStore> store;
};

struct Handoffs {
  std::vector<double> ms;
  int failed = 0;
};

Handoffs RunHandoffs(Mode mode, const std::vector<std::unique_ptr<Client>>& clients,
                     const Options& o, const std::string& prefix, const std::string& db_path) {
  Client& first = *clients[0];
  const std::vector<JobSpec> jobs = Enqueue(first, prefix, "h", o.handoffs);
  const client::JobKeys keys{prefix};
  DeleteClock deletes(first, prefix + "lock/");
  // The holders: each takes its job on a lease nobody renews.
  std::vector<std::string> holder_keys;
  for (const JobSpec& job : jobs) {
    const LeaseId lease = Grant(first, o.ttl_s);
    FixedSession session(lease);
    auto got = LeasesFor(mode, &first, prefix)->TryAcquire(job, session);
    if (!got.ok() || !got->has_value()) throw std::runtime_error("holder acquire " + job.id);
    holder_keys.push_back(
        fmt::format("{}/{:x}", keys.LockName(job.id), static_cast<std::uint64_t>(lease.value())));
  }
  Handoffs out;
  std::mutex mu;
  std::vector<std::thread> successors;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    successors.emplace_back([&, i] {
      Client* c = clients[i % clients.size()].get();
      auto job_leases = LeasesFor(mode, c, prefix);
      FixedSession session(Grant(*c, 60));
      FencedDb db(db_path);
      const auto give_up = Clock::now() + std::chrono::seconds(o.ttl_s + 20);
      while (Clock::now() < give_up) {
        auto got = job_leases->TryAcquire(jobs[i], session);
        if (got.ok() && got->has_value()) {
          const bool committed = db.Commit(jobs[i].id, (*got)->token);
          const auto at = Clock::now();
          const auto expired = deletes.DeletedAt(holder_keys[i]);
          std::lock_guard lock(mu);
          if (!committed || !expired) {
            ++out.failed;
          } else {
            out.ms.push_back(std::chrono::duration<double, std::milli>(at - *expired).count());
          }
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
      }
      std::lock_guard lock(mu);
      ++out.failed;
    });
  }
  for (auto& t : successors) t.join();
  return out;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(static_cast<double>(v.size()) * q))];
}

int Run(const Options& o) {
  test::ClusterOptions cluster_options;
  cluster_options.epochd_path = EPOCHD_PATH;
  cluster_options.extra_flags.clear();  // epochd's default timing, as deployed
  auto cluster = test::TestCluster::Start(cluster_options);
  if (!cluster.ok()) {
    fmt::print(stderr, "cluster: {}\n", cluster.status().ToString());
    return 1;
  }
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < o.clients; ++i) {
    client::ClientOptions options;
    for (int n = 0; n < (*cluster)->size(); ++n) {
      options.endpoints.push_back((*cluster)->node(n).client_address());
    }
    auto c = Client::Create(options);
    if (!c.ok()) return 1;
    clients.push_back(std::move(*c));
  }
  test_support::TempDir dir("epoch-jobs-bench");
  std::vector<Mode> modes{Mode::kRecipe, Mode::kApi};
  if (o.api_first) std::swap(modes[0], modes[1]);
  fmt::print("{:<14} {:>7} {:>15} {:>10} {:>7} {:>16} {:>16} {:>7}\n", "mode", "workers",
             "acquisitions/s", "busy/s", "errors", "handoff p50 ms", "handoff p99 ms", "failed");
  for (Mode mode : modes) {
    const std::string tag = mode == Mode::kApi ? "api" : "recipe";
    const Throughput t = RunThroughput(mode, clients, o, "bench-" + tag + "/");
    const Handoffs h = RunHandoffs(mode, clients, o, "bench-" + tag + "-h/", dir.Sub(tag + ".db"));
    fmt::print("{:<14} {:>7} {:>15.1f} {:>10.1f} {:>7} {:>16.1f} {:>16.1f} {:>7}\n", ModeName(mode),
               o.workers, static_cast<double>(t.acquired) / t.seconds,
               static_cast<double>(t.busy) / t.seconds, t.errors, Quantile(h.ms, 0.5),
               Quantile(h.ms, 0.99), h.failed);
  }
  fmt::print("handoff: {} jobs, lease TTL {} s, successor polls every {} ms\n", o.handoffs, o.ttl_s,
             o.poll_ms);
  return 0;
}

}  // namespace
}  // namespace epoch::bench

int main(int argc, char** argv) {
  epoch::bench::Options o;
  CLI::App app{"Fenced job leases: the Jobs service against the client-side recipe"};
  app.add_option("--workers", o.workers, "throughput: worker threads")->check(CLI::Range(1, 512));
  app.add_option("--jobs", o.jobs, "throughput: queued jobs")->check(CLI::Range(1, 100'000));
  app.add_option("--seconds", o.seconds, "throughput: seconds per mode")->check(CLI::Range(1, 600));
  app.add_option("--handoffs", o.handoffs, "handoff: jobs handed over at once")
      ->check(CLI::Range(1, 1000));
  app.add_option("--ttl-s", o.ttl_s, "handoff: the holders' lease TTL")->check(CLI::Range(1, 60));
  app.add_option("--poll-ms", o.poll_ms, "handoff: the successors' retry interval")
      ->check(CLI::Range(1, 10'000));
  app.add_option("--clients", o.clients, "client connections shared by the threads")
      ->check(CLI::Range(1, 64));
  app.add_flag("--api-first", o.api_first, "run the server API before the recipe");
  CLI11_PARSE(app, argc, argv);
  try {
    return epoch::bench::Run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "epoch_jobs_bench: {}\n", e.what());
    return 1;
  }
}
