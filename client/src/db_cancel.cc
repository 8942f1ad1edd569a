#include "epoch/client/db_cancel.h"

#include <array>

namespace epoch::client {

SqliteInterruptOnStop::SqliteInterruptOnStop(sqlite3* db, std::stop_token stop) {
  if (stop.stop_possible()) callback_.emplace(std::move(stop), [db] { sqlite3_interrupt(db); });
}

PostgresCancelOnStop::PostgresCancelOnStop(PGconn* conn, std::stop_token stop) {
  if (!stop.stop_possible()) return;
  cancel_ = PQgetCancel(conn);
  if (cancel_ == nullptr) return;
  // Runs at most once. std::stop_callback's destructor waits for a running callback, so the
  // destructor below sees canceller_ as the callback left it.
  callback_.emplace(std::move(stop), [this] {
    canceller_ = std::thread([cancel = cancel_] {
      std::array<char, 256> error{};
      // Best effort: when the cancel request cannot be delivered, the statement runs on and
      // the fencing guard still rejects what it commits with a stale token.
      (void)PQcancel(cancel, error.data(), static_cast<int>(error.size()));
    });
  });
}

PostgresCancelOnStop::~PostgresCancelOnStop() {
  callback_.reset();
  if (canceller_.joinable()) canceller_.join();
  if (cancel_ != nullptr) PQfreeCancel(cancel_);
}

}  // namespace epoch::client
