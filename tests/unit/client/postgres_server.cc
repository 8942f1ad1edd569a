#include "postgres_server.h"

#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"

namespace epoch::client::testing {
namespace {

constexpr int kPort = 5432;  // only names the socket file; the socket lives in our own dir

// The newest /usr/lib/postgresql/<version>/bin that has initdb and postgres.
std::filesystem::path FindPostgresBin() {
  std::vector<std::filesystem::path> candidates;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const auto bin = entry.path() / "bin";
    if (std::filesystem::exists(bin / "initdb") && std::filesystem::exists(bin / "postgres")) {
      candidates.push_back(bin);
    }
  }
  if (candidates.empty()) {
    throw std::runtime_error(
        "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin: install the "
        "postgresql package (the test command does); this test needs a real server");
  }
  std::sort(candidates.begin(), candidates.end());
  return candidates.back();
}

}  // namespace

PostgresServer::PostgresServer() {
  const std::filesystem::path bin = FindPostgresBin();
  std::unique_ptr<RunAs> run_as;
  if (::geteuid() == 0) {
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      throw std::runtime_error("running as root and there is no `postgres` user to run the server");
    }
    run_as = std::make_unique<RunAs>(RunAs{pw->pw_uid, pw->pw_gid});
    if (::chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      throw std::runtime_error("chown of the PostgreSQL temp dir failed");
    }
  }
  const std::string data = dir_.Sub("data");
  const std::string log = dir_.Sub("server.log");
  const int rc = RunCommand({(bin / "initdb").string(), "-D", data, "-U", "postgres",
                             "--auth=trust", "--no-sync", "-E", "UTF8"},
                            log, run_as.get());
  if (rc != 0) {
    throw std::runtime_error("initdb failed (exit " + std::to_string(rc) + "):\n" +
                             test_support::FileTail(log));
  }
  postgres_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{(bin / "postgres").string(), "-D", data, "-k", dir_.path(), "-p",
                               std::to_string(kPort), "-c", "listen_addresses=", "-c", "fsync=off",
                               "-c", "max_connections=20"},
      log, run_as.get());
  const std::string conninfo = ConnInfo();
  const bool up = test_support::Eventually(
      [&] { return postgres_->Running() && PQping(conninfo.c_str()) == PQPING_OK; },
      std::chrono::seconds(30), test_support::kProcessPoll);
  if (!up) {
    throw std::runtime_error("PostgreSQL did not accept connections within 30 s:\n" +
                             test_support::FileTail(log));
  }
}

PostgresServer::~PostgresServer() {
  // SIGINT = fast shutdown: disconnects clients, then exits cleanly.
  if (postgres_ && !postgres_->Stop(SIGINT, std::chrono::seconds(20))) {
    postgres_->Stop(SIGKILL, std::chrono::seconds(10));
  }
}

std::string PostgresServer::ConnInfo() const {
  return "host=" + dir_.path() + " port=" + std::to_string(kPort) +
         " user=postgres dbname=postgres connect_timeout=5";
}

PgConn PostgresServer::Connect() const {
  PgConn conn(PQconnectdb(ConnInfo().c_str()));
  if (!conn || PQstatus(conn.get()) != CONNECTION_OK) {
    throw std::runtime_error(std::string("connecting to the test PostgreSQL failed: ") +
                             (conn ? PQerrorMessage(conn.get()) : "out of memory"));
  }
  // Tests create tables idempotently; keep libpq's NOTICE chatter off stderr.
  PQsetNoticeProcessor(
      conn.get(), [](void*, const char*) {}, nullptr);
  return conn;
}

}  // namespace epoch::client::testing
