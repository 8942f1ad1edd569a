// Executors: every thread epochd runs for itself, owned in one place. Components get the context
// or pool they run on by reference; none starts a thread of its own.
//
//   domain       thread(s)        what runs there
//   raft         epoch-raft       the Raft driver's strand: Ready handling, apply, lease hooks
//   peer         epoch-peer       the peer transport's sockets, the metrics HTTP endpoint
//   watch        epoch-watch      the watch hub's dispatch strand, progress and leader timers
//   snapshot     epoch-snapshot   snapshot transfers, image assembly, compaction flushes
//   tls relay    epoch-tls-relay  the https:// client port's gRPC connections, copied to gRPC's
//                                 loopback TLS listener (tls_relay.h)
//   read pool    epoch-read (2)   range reads, history reads, forwarder timers, periodic tasks
//   maintenance  epoch-maint      Defragment, one at a time
//
// Not here: gRPC's completion-queue threads (epoch-grpc) belong to rpc::Server, which polls
// them; the WAL's sync and preallocation threads belong to wal::Wal.
//
// Lifetime: declared before every component that uses it, so it is destroyed after them (timers
// and strands bound to a context must not outlive it). Stop() of each domain is called by the
// node's shutdown in the order it states; the destructor stops whatever is still running.
//
// Threading: Start() and Stop() from the thread that owns the node.
#pragma once

#include <array>
#include <asio.hpp>
#include <thread>

namespace epoch::server {

class Executors {
 public:
  enum class Loop { kRaft, kPeer, kWatch, kSnapshot, kTlsRelay };
  static constexpr int kReadThreads = 2;

  Executors() = default;
  ~Executors();
  Executors(const Executors&) = delete;
  Executors& operator=(const Executors&) = delete;

  // Starts one named thread per loop and names the pools' threads. Once.
  void Start();
  // Stops `loop` and joins its thread: once this returns, none of its handlers runs. Idempotent.
  void Stop(Loop loop);
  // Lets the pools finish what is queued, then joins their threads. Idempotent.
  void JoinReadPool() { read_pool_.join(); }
  void JoinMaintenance() { maintenance_.join(); }

  [[nodiscard]] asio::io_context& loop(Loop loop) { return loops_[Index(loop)].io; }
  [[nodiscard]] asio::thread_pool& read_pool() { return read_pool_; }
  [[nodiscard]] asio::thread_pool& maintenance() { return maintenance_; }

 private:
  struct Thread {
    asio::io_context io;
    std::thread thread;
  };
  static constexpr std::size_t Index(Loop loop) { return static_cast<std::size_t>(loop); }

  std::array<Thread, 5> loops_;
  asio::thread_pool read_pool_{kReadThreads};
  asio::thread_pool maintenance_{1};
};

}  // namespace epoch::server
