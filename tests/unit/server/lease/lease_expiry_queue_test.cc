// LeaseExpiryQueue: an expiry check reads only the leases whose deadline may have passed.
#include "epoch/lease/lease_expiry_queue.h"

#include <catch2/catch.hpp>
#include <map>

namespace epoch::server {
namespace {

// A lease table: id -> deadline (cluster ms); counts the reads the queue makes.
struct Table {
  std::map<std::int64_t, std::int64_t> deadlines;
  std::uint64_t reads = 0;
  LeaseExpiryQueue::Lookup lookup() {
    return [this](LeaseId id) -> Result<std::optional<std::int64_t>> {
      ++reads;
      auto it = deadlines.find(id.value());
      if (it == deadlines.end()) return std::optional<std::int64_t>();
      return std::optional<std::int64_t>(it->second);
    };
  }
};

TEST_CASE("lease expiry queue: with 100k leases a check reads only the expired ones",
          "[server][lease][expiry]") {
  Table table;
  LeaseExpiryQueue queue;
  constexpr std::int64_t kLeases = 100'000;
  for (std::int64_t id = 1; id <= kLeases; ++id) {
    // Deadlines from 10 s on, 1 ms apart; leases 1..5 expire at 1 s.
    const std::int64_t deadline = id <= 5 ? 1'000 : 10'000 + id;
    table.deadlines[id] = deadline;
    queue.Schedule(LeaseId(id), deadline);
  }
  REQUIRE(queue.size() == kLeases);
  CHECK(queue.Earliest() == 1'000);

  // Before any deadline: nothing read.
  LeaseExpiryQueue::Due none = queue.CollectExpired(999, 128, table.lookup());
  CHECK(none.expired.empty());
  CHECK(none.visited == 0);
  CHECK(table.reads == 0);

  LeaseExpiryQueue::Due due = queue.CollectExpired(5'000, 128, table.lookup());
  CHECK(due.expired ==
        std::vector<LeaseId>{LeaseId(1), LeaseId(2), LeaseId(3), LeaseId(4), LeaseId(5)});
  CHECK(due.visited == 5);
  CHECK(table.reads == 5);
  CHECK_FALSE(due.more);

  // Revoked: the next check reads each once more, drops them, and touches nothing else.
  for (std::int64_t id = 1; id <= 5; ++id) table.deadlines.erase(id);
  table.reads = 0;
  due = queue.CollectExpired(5'000, 128, table.lookup());
  CHECK(due.expired.empty());
  CHECK(table.reads == 5);
  CHECK(queue.size() == kLeases - 5);
  table.reads = 0;
  due = queue.CollectExpired(5'000, 128, table.lookup());
  CHECK(table.reads == 0);
  CHECK(queue.Earliest() == 10'006);

  // 100 deadlines pass: 100 reads, not 100k.
  due = queue.CollectExpired(10'105, 1'000, table.lookup());
  CHECK(due.expired.size() == 100);
  CHECK(table.reads == 100);
}

TEST_CASE("lease expiry queue: a renewed lease moves to its stored deadline",
          "[server][lease][expiry]") {
  Table table;
  LeaseExpiryQueue queue;
  table.deadlines = {{1, 100}, {2, 200}};
  queue.Schedule(LeaseId(1), 100);
  queue.Schedule(LeaseId(2), 200);
  table.deadlines[1] = 5'000;  // renewed: its entry still says 100
  LeaseExpiryQueue::Due due = queue.CollectExpired(300, 128, table.lookup());
  CHECK(due.expired == std::vector<LeaseId>{LeaseId(2)});
  CHECK(queue.Earliest() == 200);  // lease 2 stays due until it is gone
  table.deadlines.erase(2);
  table.reads = 0;
  due = queue.CollectExpired(4'999, 128, table.lookup());
  CHECK(due.expired.empty());
  CHECK(table.reads == 1);  // lease 2, found gone; lease 1 is not due before 5,000
  CHECK(queue.Earliest() == 5'000);
  due = queue.CollectExpired(5'000, 128, table.lookup());
  CHECK(due.expired == std::vector<LeaseId>{LeaseId(1)});
}

TEST_CASE("lease expiry queue: a schedule only lowers an entry; the cap leaves the rest due",
          "[server][lease][expiry]") {
  Table table;
  LeaseExpiryQueue queue;
  queue.Schedule(LeaseId(7), 500);
  queue.Schedule(LeaseId(7), 900);  // a later bound does not raise it
  CHECK(queue.Earliest() == 500);
  queue.Schedule(LeaseId(7), 300);
  CHECK(queue.Earliest() == 300);
  CHECK(queue.size() == 1);

  for (std::int64_t id = 1; id <= 10; ++id) {
    table.deadlines[id] = id;
    queue.Schedule(LeaseId(id), id);
  }
  table.deadlines[7] = 7;
  LeaseExpiryQueue::Due due = queue.CollectExpired(100, 4, table.lookup());
  CHECK(due.expired.size() == 4);
  CHECK(due.more);
  due = queue.CollectExpired(100, 100, table.lookup());
  CHECK(due.expired.size() == 10);  // the same first four again (not revoked yet), then the rest
  CHECK_FALSE(due.more);
}

TEST_CASE("lease expiry queue: a failed read stops the check and keeps the entry",
          "[server][lease][expiry]") {
  LeaseExpiryQueue queue;
  queue.Schedule(LeaseId(1), 10);
  queue.Schedule(LeaseId(2), 20);
  LeaseExpiryQueue::Due due = queue.CollectExpired(
      100, 128,
      [](LeaseId) -> Result<std::optional<std::int64_t>> { return Status::IOError("disk gone"); });
  CHECK_FALSE(due.status.ok());
  CHECK(due.visited == 1);
  CHECK(queue.size() == 2);
  CHECK(queue.Earliest() == 10);
}

}  // namespace
}  // namespace epoch::server
