// PeriodicTask (server/node/include/epoch/node/periodic_task.h): ticks until its tick says done or
// it is stopped, and no tick runs once Stop() has returned.
#include "epoch/node/periodic_task.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "epoch/test_support/eventually.h"

namespace epoch::server {

using epoch::test_support::Eventually;
namespace {

TEST_CASE("a periodic task ticks until its tick says it is done", "[node][periodic]") {
  asio::thread_pool pool(1);
  std::atomic<int> ticks{0};
  PeriodicTask task(pool.get_executor(), std::chrono::milliseconds(1), [&] { return ++ticks < 5; });
  task.Start();
  CHECK(Eventually([&] { return ticks.load() == 5; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(ticks.load() == 5);
  pool.join();
}

TEST_CASE("a stopped periodic task does not tick again", "[node][periodic]") {
  asio::thread_pool pool(2);
  std::atomic<int> ticks{0};
  PeriodicTask task(pool.get_executor(), std::chrono::milliseconds(1), [&] {
    ++ticks;
    return true;
  });
  task.Start();
  CHECK(Eventually([&] { return ticks.load() >= 3; }));
  task.Stop();
  // Stop() waited for a running tick: from here on the count cannot move.
  const int at_stop = ticks.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(ticks.load() == at_stop);
  task.Start();  // after Stop, Start does nothing
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(ticks.load() == at_stop);
  pool.join();
}

}  // namespace
}  // namespace epoch::server
