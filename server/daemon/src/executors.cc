#include "executors.h"

#include <latch>
#include <memory>

#include "epoch/thread_name.h"

namespace epoch::server {
namespace {

constexpr std::array<const char*, 5> kLoopNames = {"epoch-raft", "epoch-peer", "epoch-watch",
                                                   "epoch-snapshot", "epoch-tls-relay"};

// Names every thread of `pool`: one task per thread, each holding its thread until all ran. The
// latch is shared: a task may still be inside arrive_and_wait() after this function returned.
void NamePool(asio::thread_pool& pool, int threads, const char* name) {
  auto named = std::make_shared<std::latch>(threads + 1);
  for (int i = 0; i < threads; ++i) {
    asio::post(pool, [named, name] {
      SetThreadName(name);
      named->arrive_and_wait();
    });
  }
  named->arrive_and_wait();
}

}  // namespace

Executors::~Executors() {
  for (std::size_t i = 0; i < loops_.size(); ++i) Stop(static_cast<Loop>(i));
  read_pool_.join();
  maintenance_.join();
}

void Executors::Start() {
  NamePool(read_pool_, kReadThreads, "epoch-read");
  NamePool(maintenance_, 1, "epoch-maint");
  for (std::size_t i = 0; i < loops_.size(); ++i) {
    Thread& t = loops_[i];
    t.thread = std::thread([&io = t.io, name = kLoopNames[i]] {
      SetThreadName(name);
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
}

void Executors::Stop(Loop loop) {
  Thread& t = loops_[Index(loop)];
  t.io.stop();
  if (t.thread.joinable()) t.thread.join();
}

}  // namespace epoch::server
