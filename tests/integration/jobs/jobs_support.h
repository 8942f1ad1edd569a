// Fixtures of the jobs suites (jobs_tests, python_worker_tests): a 3-node epochd cluster, a
// client and session on it, jobs enqueued under kKeys, a shared SQLite file and an in-process
// JobRunner worker.
#pragma once

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "epoch/client/client.h"
#include "epoch/client/job.h"
#include "epoch/client/job_effects.h"
#include "epoch/client/job_leases.h"
#include "epoch/client/job_runner.h"
#include "epoch/client/session.h"
#include "epoch/client/sqlite_fencing.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/test_support/test_cluster.h"

namespace epoch::client::jobs_test {

using std::chrono::milliseconds;
using std::chrono::seconds;
using test_support::Eventually;
using test_support::FileTail;
using test_support::kProcessPoll;
using test_support::TempDir;
using Effects = std::vector<std::pair<std::int64_t, std::int64_t>>;

inline const JobKeys kKeys{"jobs-test/"};

inline std::unique_ptr<test::TestCluster> StartCluster() {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  auto cluster = test::TestCluster::Start(options);
  INFO((cluster.ok() ? "" : cluster.status().ToString()));
  REQUIRE(cluster.ok());
  return std::move(cluster).value();
}

inline std::unique_ptr<Client> NewClient(const test::TestCluster& cluster) {
  ClientOptions options;
  std::string all = cluster.Endpoints();
  for (std::size_t start = 0; start <= all.size();) {
    const std::size_t comma = std::min(all.find(',', start), all.size());
    options.endpoints.push_back(all.substr(start, comma - start));
    start = comma + 1;
  }
  auto client = Client::Create(options);
  REQUIRE(client.ok());
  return std::move(client).value();
}

inline std::unique_ptr<Session> NewSession(Client* client, seconds ttl = seconds(3)) {
  SessionConfig config;
  config.timing.ttl = ttl;
  auto session = Session::Create(client, config);
  REQUIRE(session.ok());
  return std::move(session).value();
}

inline JobSpec Enqueue(Client& client, const std::string& id, std::vector<std::string> stages) {
  const std::string value = EncodeJob(stages, "payload of " + id);
  REQUIRE(client.Put(kKeys.Job(id), value).ok());
  auto job = ParseJob(id, value);
  REQUIRE(job.ok());
  return *job;
}

inline std::optional<std::string> Value(Client& client, const std::string& key) {
  auto kv = client.Get(key);
  REQUIRE(kv.ok());
  if (!kv->has_value()) return std::nullopt;
  return (*kv)->value();
}

inline std::int64_t CountPrefix(Client& client, const std::string& prefix) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixRangeEnd(prefix));
  range.set_count_only(true);
  auto response = client.Range(range);
  REQUIRE(response.ok());
  return response->count();
}

// A SQLite database file with both tables; each Connection is one worker's connection.
struct SqliteFile {
  struct Connection {
    explicit Connection(const std::filesystem::path& path) {
      REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
      sqlite3_busy_timeout(db, 10'000);
      store = std::make_unique<SqliteFencedStore>(db);
      effects = std::make_unique<SqliteEffectLog>(db);
      REQUIRE(store->CreateTable().ok());
      REQUIRE(effects->CreateTable().ok());
    }
    ~Connection() {
      store.reset();
      effects.reset();
      sqlite3_close(db);
    }
    sqlite3* db = nullptr;
    std::unique_ptr<SqliteFencedStore> store;
    std::unique_ptr<SqliteEffectLog> effects;
  };

  Effects Of(const std::string& job) {
    Connection c(path);
    Effects out;
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(c.db, "SELECT stage, token FROM job_effects WHERE job_id = ?1 ORDER BY seq",
                       -1, &stmt, nullptr);
    sqlite3_bind_text(stmt, 1, job.c_str(), -1, SQLITE_TRANSIENT);
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      out.emplace_back(sqlite3_column_int64(stmt, 0), sqlite3_column_int64(stmt, 1));
    }
    sqlite3_finalize(stmt);
    return out;
  }

  TempDir dir{"epoch-jobs-sqlite"};
  std::filesystem::path path = dir.Sub("jobs.db");
};

// A runner over one store and effect log; stage work runs `hook` (default: nothing).
struct Worker {
  Worker(Client* client, FencedStore* store, EffectLog* effects, std::int64_t max_changes = 3,
         std::function<Status(const StageContext&)> hook = {})
      : leases(client, {kKeys, max_changes, std::chrono::milliseconds(3000), "test"}),
        handler(effects, "test", [hook](const StageContext& ctx) -> Result<std::string> {
          if (hook) {
            if (Status st = hook(ctx); !st.ok()) return st;
          }
          return "done " + ctx.stage_name;
        }) {
    JobRunnerOptions options;
    options.on_event = [this](const JobEvent& e) {
      std::lock_guard lock(mu);
      events.push_back(e);
    };
    runner = std::make_unique<JobRunner>(&leases, store, &handler, options);
  }

  EpochJobLeases leases;
  RecordingStageHandler handler;
  std::unique_ptr<JobRunner> runner;
  std::mutex mu;
  std::vector<JobEvent> events;
};

}  // namespace epoch::client::jobs_test
