// fencing_holder: one lock holder of the fencing end-to-end test (fencing_e2e_test.cc).
//
//   fencing_holder --endpoints A[,B..] --lock NAME --db FILE --job ID --ttl-ms N
//                  [--via mutex|service] [--go-file PATH]
//   fencing_holder --db FILE --job ID --read
//
// Holder mode: opens an epoch::Session (lease with keep-alive, TTL N), takes the lock — through
// client/'s epoch::Mutex (the clientv3 recipe) or the server's v3lockpb.Lock service (token from
// the `epoch-fencing-token` trailing metadata) — and prints "acquired <token>". With --go-file it
// prints "waiting" and waits until that file exists (the test SIGSTOPs it meanwhile), then it
// writes *without* re-checking its session, as a worker paused between its check and its write
// would: stage 1 of job ID in SQLite's job_states, guarded by the token (SqliteFencedStore).
// Prints "applied <token>" (exit 0) or "stale <attempted> <current>" (exit 3); errors exit 1.
// Read mode prints "row <last_fencing_token> <stage> <state> <result>".
//
// Every wait is bounded (lock: 20 s, go file: 30 s).
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <sqlite3.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "epoch/client/client.h"
#include "epoch/client/mutex.h"
#include "epoch/client/session.h"
#include "epoch/client/sqlite_fencing.h"
#include "epoch/test_support/eventually.h"
#include "v3lockpb/v3lock.grpc.pb.h"

namespace {

using epoch::FencingToken;
using epoch::Result;
using epoch::Status;

[[noreturn]] void Die(int code, const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  // No destructors: a paused-then-continued holder must not block on closing its session.
  std::_Exit(code);
}

void Say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string name = argv[i];
    if (!name.starts_with("--")) Die(2, "usage: unexpected argument " + name);
    if (name == "--read") {
      args["read"] = "1";
      continue;
    }
    if (i + 1 >= argc) Die(2, "usage: " + name + " needs a value");
    args[name.substr(2)] = argv[++i];
  }
  return args;
}

std::string Need(const std::map<std::string, std::string>& args, const std::string& name) {
  auto it = args.find(name);
  if (it == args.end()) Die(2, "usage: --" + name + " is required");
  return it->second;
}

sqlite3* OpenDb(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) Die(1, "error: cannot open " + path);
  sqlite3_busy_timeout(db, 5000);
  return db;
}

// The token through the server-side Lock service (the lock is released with the lease).
FencingToken LockViaService(const std::string& endpoint, const std::string& name,
                            epoch::LeaseId lease) {
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  auto stub = v3lockpb::Lock::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v3lockpb::LockRequest request;
  request.set_name(name);
  request.set_lease(lease.value());
  v3lockpb::LockResponse response;
  grpc::Status s = stub->Lock(&ctx, request, &response);
  if (!s.ok()) Die(1, "error: Lock: " + s.error_message());
  auto [begin, end] = ctx.GetServerTrailingMetadata().equal_range("epoch-fencing-token");
  if (begin == end) Die(1, "error: Lock answered without epoch-fencing-token");
  return FencingToken(std::stoll(std::string(begin->second.data(), begin->second.size())));
}

void WaitForFile(const std::string& path) {
  if (!epoch::test_support::Eventually([&] { return std::filesystem::exists(path); },
                                       std::chrono::seconds(30), std::chrono::milliseconds(5))) {
    Die(1, "error: no go file " + path);
  }
}

int Read(const std::map<std::string, std::string>& args) {
  sqlite3* db = OpenDb(Need(args, "db"));
  epoch::client::SqliteFencedStore store(db);
  Result<epoch::client::JobRow> row = store.ReadJob(Need(args, "job"));
  if (!row.ok()) Die(1, "error: " + row.status().ToString());
  Say(fmt::format("row {} {} {} {}", row->last_fencing_token.value(), row->stage, row->state,
                  row->result));
  sqlite3_close(db);
  return 0;
}

int Hold(const std::map<std::string, std::string>& args) {
  const std::string endpoints = Need(args, "endpoints");
  epoch::client::ClientOptions options;
  for (std::size_t pos = 0; pos <= endpoints.size();) {
    std::size_t comma = endpoints.find(',', pos);
    if (comma == std::string::npos) comma = endpoints.size();
    options.endpoints.push_back(endpoints.substr(pos, comma - pos));
    pos = comma + 1;
  }
  auto client = epoch::client::Client::Create(options);
  if (!client.ok()) Die(1, "error: client: " + client.status().ToString());
  epoch::client::SessionConfig config;
  config.timing.ttl = std::chrono::milliseconds(std::stoll(Need(args, "ttl-ms")));
  auto session = epoch::client::Session::Create(client->get(), config);
  if (!session.ok()) Die(1, "error: session: " + session.status().ToString());

  const std::string name = Need(args, "lock");
  FencingToken token(0);
  if (args.count("via") && args.at("via") == "service") {
    token = LockViaService(options.endpoints.front(), name, (*session)->lease());
  } else {
    // Without the session's stop token: this holder must reach its write even when paused.
    epoch::client::Mutex mutex(client->get(), (*session)->lease(), name);
    Result<FencingToken> locked = mutex.Lock({std::chrono::milliseconds(20'000), {}});
    if (!locked.ok()) Die(1, "error: lock: " + locked.status().ToString());
    token = *locked;
  }
  Say(fmt::format("acquired {}", token.value()));

  sqlite3* db = OpenDb(Need(args, "db"));
  epoch::client::SqliteFencedStore store(db);
  const std::string job = Need(args, "job");
  if (Status s = store.CreateTable(); !s.ok()) Die(1, "error: " + s.ToString());
  if (Status s = store.RegisterJob(job); !s.ok()) Die(1, "error: " + s.ToString());
  if (args.count("go-file")) {
    Say("waiting");
    WaitForFile(args.at("go-file"));
  }
  if (Status s = store.Begin(); !s.ok()) Die(1, "error: " + s.ToString());
  epoch::client::FencedWriteResult r =
      store.FencedUpdate({job, 1, "write", token, "done", fmt::format("holder {}", token.value())});
  if (r.applied()) {
    if (Status s = store.Commit(); !s.ok()) Die(1, "error: commit: " + s.ToString());
    Die(0, fmt::format("applied {}", token.value()));
  }
  (void)store.Rollback();
  if (r.stale()) {
    Die(3, fmt::format("stale {} {}", r.stale_token().attempted_token.value(),
                       r.stale_token().current_token.value()));
  }
  Die(1, "error: write: " + r.ToString());
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = ParseArgs(argc, argv);
  if (args.count("read")) return Read(args);
  return Hold(args);
}
