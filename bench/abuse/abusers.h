// The abusive clients of epoch_abuse_bench: each runs on its own
// threads from Start() until Stop(), bounded in count and time, and reports what it did.
//
// Threading: Start and Stop from one thread; the counters are atomics.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace epoch::bench {

class Abuser {
 public:
  virtual ~Abuser() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  virtual void Start() = 0;
  virtual void Stop() = 0;
  // One line: what the abuser sent and what the server answered.
  [[nodiscard]] virtual std::string Summary() const = 0;
  // Whether the abuser reached the state it then holds (every stream it wanted opened or
  // refused); until then it is also a flood of new streams.
  [[nodiscard]] virtual bool Settled() const { return true; }
};

// (a) Txns of 127 full-range reads plus a put (128 ops, etcd's --max-txn-ops), back to back: the
// reads run on the Raft thread at apply time (--max-txn-read-keys refuses them).
std::unique_ptr<Abuser> MakeFullRangeTxnAbuser(std::string address);
// (b) Maintenance.Snapshot streams opened and never read, a new one every `every`, at most `max`.
std::unique_ptr<Abuser> MakeUnreadSnapshotAbuser(std::string address,
                                                 std::chrono::milliseconds every, int max);
// (c) `streams` LeaseKeepAlive streams on `lease`, each sent a keep-alive per second and never
// read.
std::unique_ptr<Abuser> MakeUnreadKeepAliveAbuser(std::string address, std::int64_t lease,
                                                  int streams);

// A channel with a connection of its own (gRPC shares connections between channels by default).
std::shared_ptr<grpc::Channel> OwnConnection(const std::string& address);

}  // namespace epoch::bench
