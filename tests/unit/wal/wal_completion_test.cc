// The completion thread: durability callbacks run on their own thread, so the sync thread writes
// and syncs the next batch while earlier callers are still being woken. What must still hold: no
// callback before its batch's fdatasync returned, callbacks in submission order, fail-stop.
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "epoch/test_support/eventually.h"
#include "epoch/wal/fault_injector.h"
#include "epoch/wal/format.h"
#include "epoch/wal/sim_file_system.h"
#include "epoch/wal/wal.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using test_support::Eventually;
using testing::Callbacks;
using testing::kWaitTimeout;
using testing::MakeEntry;

constexpr const char* kDir = "/data/wal";
const std::string kSegment = std::string(kDir) + "/" + format::SegmentFileName(1);

// Holds the completion thread inside a callback until opened (or until the deadline, so that a
// failed test cannot hang in the WAL's destructor).
class Gate {
 public:
  DurableCallback Blocking(Callbacks& record) {
    DurableCallback inner = record.Make();
    return [this, inner](const Status& s) {
      inner(s);
      std::unique_lock lock(mu_);
      entered_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, kWaitTimeout, [&] { return open_; });
    };
  }
  bool AwaitEntered() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWaitTimeout, [&] { return entered_; });
  }
  void Open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  ~Gate() { Open(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool open_ = false;
};

bool Durable(const SimFileSystem& fs, const raft::Entry& e) {
  const auto contents = fs.DurableContents(kSegment);
  return contents && contents->find(e.data) != std::string::npos;
}

struct Env {
  SimFileSystem fs;
  std::shared_ptr<FaultInjector> faults = std::make_shared<FaultInjector>();
  Env() { fs.SetFaultHook(faults); }
  std::unique_ptr<Wal> Open(bool inline_callbacks = false) {
    Options o;
    o.segment_bytes = 1 << 20;
    o.inline_callbacks = inline_callbacks;
    o.log = [](LogLevel, std::string_view) {};
    auto wal = Wal::Open(fs, kDir, o);
    INFO(wal.status().ToString());
    REQUIRE(wal.ok());
    return std::move(wal).value();
  }
};

TEST_CASE("completion: every callback finds its entry already durable", "[wal][completion]") {
  // Also with the callbacks run on the sync thread itself (what epochd uses).
  const bool inline_callbacks = GENERATE(false, true);
  CAPTURE(inline_callbacks);
  Env env;
  auto wal = env.Open(inline_callbacks);
  // A slow disk (real time): an early callback would find the durable image without its entry.
  env.faults->SetDelay(FsOp::kSync, std::chrono::milliseconds(2));
  std::mutex index_mu;
  std::uint64_t next = 1;
  std::atomic<int> not_durable{0};
  std::atomic<int> failed{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 40; ++k) {
        std::lock_guard lock(index_mu);
        const raft::Entry e = MakeEntry(next, 1, 200);
        const Status s = wal->Append({e}, std::nullopt, [&, e](const Status& st) {
          if (!st.ok()) ++failed;
          // The durable image (what a crash keeps) must already hold the entry.
          if (!Durable(env.fs, e)) ++not_durable;
          ++done;
        });
        if (!s.ok()) ++failed;
        ++next;
      }
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(Eventually([&] { return done.load() == 320; }, kWaitTimeout));
  CHECK(failed == 0);
  CHECK(not_durable == 0);
  CHECK(wal->Close().ok());
}

TEST_CASE("completion: a slow callback does not hold back the next fdatasync, only the callbacks",
          "[wal][completion]") {
  Env env;
  auto wal = env.Open();
  Gate gate;
  Callbacks first, second, third;
  const raft::Entry e2 = MakeEntry(2, 1, 64);
  REQUIRE(wal->Append({MakeEntry(1, 1, 64)}, std::nullopt, gate.Blocking(first)).ok());
  REQUIRE(gate.AwaitEntered());  // the completion thread is now held in the first callback

  // The second batch is written and synced meanwhile; its callback waits for the first.
  REQUIRE(wal->Append({e2}, std::nullopt, second.Make()).ok());
  REQUIRE(Eventually([&] { return wal->stats().frames >= 2; }, kWaitTimeout));
  CHECK(Durable(env.fs, e2));
  CHECK(second.Count() == 0);

  // The third batch's fdatasync stalls: its callback must not run, even once the queue moves.
  env.faults->Stall(FsOp::kSync, PathEndsWith(".wal"));
  REQUIRE(wal->Append({MakeEntry(3, 1, 64)}, std::nullopt, third.Make()).ok());
  REQUIRE(env.faults->AwaitBlocked(1, kWaitTimeout));
  gate.Open();
  REQUIRE(second.Wait(1));
  CHECK(second.Statuses()[0].ok());
  CHECK(third.Count() == 0);
  CHECK_FALSE(Durable(env.fs, MakeEntry(3, 1, 64)));

  env.faults->Release(FsOp::kSync);
  REQUIRE(third.Wait(1));
  CHECK(third.Statuses()[0].ok());
  CHECK(Durable(env.fs, MakeEntry(3, 1, 64)));
  CHECK(first.Statuses()[0].ok());
  CHECK(wal->Close().ok());
}

TEST_CASE("completion: an fdatasync failure while earlier callbacks run fails only what follows",
          "[wal][completion]") {
  Env env;
  auto wal = env.Open();
  Gate gate;
  std::mutex order_mu;
  std::vector<std::pair<int, Status>> order;
  const auto recorder = [&](int id) {
    return [&, id](const Status& s) {
      std::lock_guard lock(order_mu);
      order.emplace_back(id, s);
    };
  };
  Callbacks first;
  DurableCallback blocking = gate.Blocking(first);
  REQUIRE(wal->Append({MakeEntry(1, 1)}, std::nullopt,
                      [&, blocking](const Status& s) {
                        recorder(1)(s);
                        blocking(s);
                      })
              .ok());
  REQUIRE(gate.AwaitEntered());

  // Batch 2's fdatasync fails while batch 1's callback is still running: fail-stop.
  env.faults->FailNext(FsOp::kSync, Status::IOError("fdatasync: EIO"), 1, PathEndsWith(".wal"));
  REQUIRE(wal->Append({MakeEntry(2, 1)}, std::nullopt, recorder(2)).ok());
  REQUIRE(Eventually([&] { return !wal->Health().ok(); }, kWaitTimeout));
  const std::uint64_t syncs = env.faults->Count(FsOp::kSync);
  REQUIRE(wal->Append({MakeEntry(3, 1)}, std::nullopt, recorder(3)).ok());
  wal->Sync(recorder(4));
  gate.Open();
  REQUIRE(Eventually(
      [&] {
        std::lock_guard lock(order_mu);
        return order.size() == 4;
      },
      kWaitTimeout));
  {
    std::lock_guard lock(order_mu);
    for (int i = 0; i < 4; ++i) CHECK(order[i].first == i + 1);
    CHECK(order[0].second.ok());  // its fdatasync had succeeded
    for (int i = 1; i < 4; ++i) CHECK(order[i].second.Is(StatusCode::kIOError));
  }
  CHECK(env.faults->Count(FsOp::kSync) <= syncs + 1);  // never retried (+ the preallocator's)
  CHECK(wal->Close().Is(StatusCode::kIOError));
}

}  // namespace
}  // namespace epoch::wal
