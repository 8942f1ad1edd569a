// The fenced worker process of the lock workload (lock_workload.h). Started by the harness as
// `chaos_runner --worker --worker-id N --endpoints A,B,C --db PATH --job J --ttl-s T
// --drift-rho R`; records every acquisition in `acquisitions`, runs until SIGTERM, then records its
// counters in worker_stats and exits 0.
#include <fmt/format.h>
#include <sqlite3.h>

#include <atomic>
#include <csignal>
#include <map>
#include <sstream>
#include <thread>

#include "epoch/chaos/lock_workload.h"
#include "epoch/client/client.h"
#include "epoch/client/mutex.h"
#include "epoch/client/session.h"
#include "epoch/client/sqlite_fencing.h"

namespace epoch::chaos {
namespace {

std::atomic<bool> g_stop{false};
void OnTerm(int) { g_stop.store(true); }

struct WorkerArgs {
  int id = 0;
  std::vector<std::string> endpoints;
  std::string db;
  std::string job;
  int ttl_s = 1;
  double drift_rho = 0.05;
};

Result<WorkerArgs> Parse(int argc, char** argv) {
  std::map<std::string, std::string> kv;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--worker") continue;
    if (i + 1 >= argc) return Status::InvalidArgument("worker: " + a + " needs a value");
    kv[a] = argv[++i];
  }
  WorkerArgs w;
  try {
    w.id = std::stoi(kv.at("--worker-id"));
    w.db = kv.at("--db");
    w.job = kv.at("--job");
    w.ttl_s = std::stoi(kv.at("--ttl-s"));
    w.drift_rho = std::stod(kv.at("--drift-rho"));
    std::stringstream ss(kv.at("--endpoints"));
    for (std::string e; std::getline(ss, e, ',');) w.endpoints.push_back(e);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("worker: bad or missing flag ({})", e.what()));
  }
  return w;
}

struct Counters {
  std::int64_t acquisitions = 0;
  std::int64_t stale = 0;
};

// One stage under the guard. Returns false when this holder must stop (fenced out or error).
bool CommitStage(sqlite3* db, client::SqliteFencedStore& store, const WorkerArgs& a,
                 FencingToken token, Counters& n) {
  if (!store.Begin().ok()) return false;
  auto row = store.ReadJob(a.job);
  if (!row.ok()) {
    (void)store.Rollback();
    return false;
  }
  client::StageWrite w{a.job, row->stage + 1, fmt::format("stage-{}", row->stage + 1),
                       token, "running",      fmt::format("worker {}", a.id)};
  client::FencedWriteResult r = store.FencedUpdate(w);
  if (!r.applied()) {
    if (r.stale()) ++n.stale;
    fmt::print("worker {}: token {} stage {} not applied: {}\n", a.id, token.value(), w.stage,
               r.ToString());
    (void)store.Rollback();
    return false;
  }
  std::string insert =
      fmt::format("INSERT INTO commits (job, stage, token, worker) VALUES ('{}', {}, {}, {})",
                  a.job, w.stage, token.value(), a.id);
  if (sqlite3_exec(db, insert.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    (void)store.Rollback();
    return false;
  }
  return store.Commit().ok();
}

std::int64_t MonotonicNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The session's own deadline (send time of the last acknowledged renewal + TTL/(1+ρ)), sampled
// every 2 ms while the lock is held. Session exposes it as Remaining() = deadline - now, zero once
// passed; now + Remaining() read while positive is the deadline (up to the instants of the two
// clock reads, in the early direction). The latest sample is what the worker believed when it
// stopped: a SIGSTOP freezes this thread with the session's, so no sample comes from a later
// renewal than the worker saw.
class DeadlineSampler {
 public:
  explicit DeadlineSampler(const client::Session& session)
      : session_(session), thread_([this](std::stop_token stop) { Run(stop); }) {}
  // Stops sampling (after one last sample) and returns the latest deadline; 0 if none.
  std::int64_t Finish() {
    thread_.request_stop();
    thread_.join();
    Sample();
    return deadline_ns_.load();
  }

 private:
  void Sample() {
    const std::int64_t now = MonotonicNs();
    const std::int64_t left = session_.Remaining().count();
    if (left > 0) deadline_ns_.store(std::max(deadline_ns_.load(), now + left));
  }
  void Run(const std::stop_token& stop) {
    // Bounded: 2 ms apart, at most ~30 minutes of one hold.
    for (int i = 0; i < 1'000'000 && !stop.stop_requested(); ++i) {
      Sample();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  const client::Session& session_;
  std::atomic<std::int64_t> deadline_ns_{0};
  std::jthread thread_;  // last: it samples the members above
};

void HoldAndWork(client::Client& c, client::Session& session, sqlite3* db,
                 client::SqliteFencedStore& store, const WorkerArgs& a, Counters& n) {
  client::Mutex mutex(&c, session, "/lock/" + a.job);
  auto token = mutex.Lock({std::chrono::milliseconds(3000), {}});
  if (!token.ok()) return;
  Acquisition record;
  record.returned_ns = MonotonicNs();
  DeadlineSampler deadline(session);
  ++n.acquisitions;
  record.worker = a.id;
  record.lease = session.lease().value();
  record.token = token->value();
  record.header_revision = mutex.header().revision();
  record.ttl_ms = a.ttl_s * 1000;
  record.drift_rho = a.drift_rho;
  // The token must be the lock key's create_revision (docs/timing-and-safety.md §9), which a
  // linearizable read shows independently of the Mutex's own bookkeeping.
  if (auto kv = c.Get(mutex.key(), {std::chrono::milliseconds(500), {}});
      kv.ok() && kv->has_value() && (*kv)->lease() == record.lease) {
    record.key_create_revision = (*kv)->create_revision();
  }
  // Tell the harness who holds the lock, so a worker pause can hit the holder and watch its lease.
  (void)c.Put(HolderKey(a.job), fmt::format("{} {:x}", a.id, record.lease), LeaseId(0),
              {std::chrono::milliseconds(500), {}});
  for (int stage = 0; stage < 3 && !g_stop.load(); ++stage) {
    if (!session.CanTakeNewWork()) break;
    // The stage's own work, between the session check and the commit: a pause that lands here
    // (a GC pause, SIGSTOP) outlives the lease, and only the fencing guard stops the commit.
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    if (!CommitStage(db, store, a, *token, n)) break;
  }
  record.end_ns = MonotonicNs();
  record.deadline_ns = deadline.Finish();
  (void)mutex.Unlock({std::chrono::milliseconds(1000), {}});
  if (Status recorded = RecordAcquisition(db, record); !recorded.ok()) {
    fmt::print("worker {}: {}\n", a.id, recorded.ToString());
  }
}

}  // namespace

int RunLockWorker(int argc, char** argv) {
  std::signal(SIGTERM, OnTerm);
  auto args = Parse(argc, argv);
  if (!args.ok()) {
    fmt::print(stderr, "{}\n", args.status().ToString());
    return 2;
  }
  sqlite3* db = nullptr;
  if (sqlite3_open(args->db.c_str(), &db) != SQLITE_OK) return 3;
  sqlite3_busy_timeout(db, 10'000);
  client::SqliteFencedStore store(db);
  client::ClientOptions copts;
  copts.endpoints = args->endpoints;
  copts.call_timeout = std::chrono::milliseconds(1500);
  copts.dial_timeout = std::chrono::milliseconds(200);
  copts.seed = static_cast<std::uint64_t>(args->id) * 7919;
  // Chaos clusters with client TLS serve self-signed --auto-tls certificates (https:// endpoints).
  copts.tls.insecure_skip_verify = true;
  auto c = client::Client::Create(copts);
  if (!c.ok()) return 4;
  Counters n;
  std::unique_ptr<client::Session> session;
  for (int round = 0; !g_stop.load() && round < 1'000'000; ++round) {
    if (!session || session->state() == client::SessionState::kLost) {
      if (session) (void)session->Close();
      client::SessionConfig cfg;
      cfg.timing.ttl = std::chrono::seconds(args->ttl_s);
      cfg.timing.drift_rho = args->drift_rho;
      auto s = client::Session::Create(c->get(), cfg);
      if (!s.ok()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // retry pacing
        continue;
      }
      session = std::move(*s);
    }
    HoldAndWork(**c, *session, db, store, *args, n);
  }
  if (session) (void)session->Close();
  std::string stats = fmt::format(
      "INSERT OR REPLACE INTO worker_stats (worker, acquisitions, stale) VALUES ({}, {}, {})",
      args->id, n.acquisitions, n.stale);
  int rc = sqlite3_exec(db, stats.c_str(), nullptr, nullptr, nullptr);
  sqlite3_close(db);
  fmt::print("worker {}: {} acquisitions, {} stale rejections\n", args->id, n.acquisitions,
             n.stale);
  return rc == SQLITE_OK ? 0 : 5;
}

}  // namespace epoch::chaos
