// PostgresServer: a private PostgreSQL for one test — initdb in a temporary directory, postgres
// listening only on a unix socket inside it, stopped by PID (fast shutdown) on destruction.
// When the machine runs as root the server runs as the `postgres` user (PostgreSQL refuses root).
//
// Missing binaries or a server that does not come up throw std::runtime_error with the reason and
// the server log: the test fails loudly, it never skips.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <string>

#include "epoch/test_support/temp_dir.h"
#include "test_support.h"

namespace epoch::client::testing {

struct PgConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using PgConn = std::unique_ptr<PGconn, PgConnCloser>;

class PostgresServer {
 public:
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  // libpq connection string for the `postgres` database as the `postgres` superuser.
  [[nodiscard]] std::string ConnInfo() const;
  // A new connection; throws if it cannot connect.
  [[nodiscard]] PgConn Connect() const;

 private:
  test_support::TempDir dir_{"epoch-pg"};
  std::unique_ptr<ChildProcess> postgres_;
};

}  // namespace epoch::client::testing
