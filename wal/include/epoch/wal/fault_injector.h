// FaultInjector: the usual FaultHook. Install it on a SimFileSystem in tests, or on the
// PosixFileSystem at run time for the server's chaos failpoints (a slow, stalled or failing disk).
//
//   auto faults = std::make_shared<FaultInjector>();
//   fs.SetFaultHook(faults);
//   faults->FailAlways(FsOp::kSync, Status::IOError("EIO"));   // every fdatasync fails
//   faults->Stall(FsOp::kSync, PathEndsWith(".wal"));  ...  faults->AwaitBlocked(1, 5s);
//   ...  faults->Release(FsOp::kSync);
//   faults->SetDelay(FsOp::kSync, 200ms);                       // slow disk (real time)
//
// Rules match on the operation and, optionally, on the path (PathContains / PathEndsWith, or any
// predicate). A stalled operation blocks the thread performing it until released (or until
// Clear() or destruction).
//
// Thread-safety: every method may be called from any thread, concurrently with the hooked
// operations.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "epoch/wal/file_system.h"

namespace epoch::wal {

// Which paths a rule applies to; an empty matcher matches every path.
using PathMatch = std::function<bool(std::string_view path)>;
[[nodiscard]] PathMatch PathContains(std::string fragment);
[[nodiscard]] PathMatch PathEndsWith(std::string suffix);

class FaultInjector final : public FaultHook {
 public:
  FaultInjector() = default;
  ~FaultInjector() override;
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  // Every matching operation fails with `error` until Clear().
  void FailAlways(FsOp op, Status error, PathMatch match = {});
  // The next `count` matching operations fail with `error`.
  void FailNext(FsOp op, Status error, int count = 1, PathMatch match = {});
  // Matching operations block until Release(op) (or Clear()).
  void Stall(FsOp op, PathMatch match = {});
  void Release(FsOp op);
  // Matching operations sleep this long first (a slow disk). Zero removes the delay.
  void SetDelay(FsOp op, std::chrono::microseconds delay);
  // Removes every rule and releases every blocked operation.
  void Clear();

  // Operations currently blocked by a stall.
  [[nodiscard]] int Blocked() const;
  // Waits until at least `n` operations are blocked; false on timeout.
  [[nodiscard]] bool AwaitBlocked(int n, std::chrono::milliseconds timeout) const;
  // How many operations of this kind were seen (performed or failed).
  [[nodiscard]] std::uint64_t Count(FsOp op) const;

  [[nodiscard]] Status BeforeOp(FsOp op, std::string_view path) override;

 private:
  struct Rule {
    FsOp op;
    PathMatch match;
    Status error;   // failure rules
    int remaining;  // -1: forever
    bool stall;     // stall rules
  };

  [[nodiscard]] static bool Matches(const Rule& r, FsOp op, std::string_view path) {
    return r.op == op && (!r.match || r.match(path));
  }

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<Rule> rules_;                           // guarded by mu_
  std::map<FsOp, std::chrono::microseconds> delays_;  // guarded by mu_
  std::map<FsOp, std::uint64_t> counts_;              // guarded by mu_
  std::uint64_t release_generation_ = 0;              // bumped by Release/Clear
  int blocked_ = 0;                                   // guarded by mu_
};

}  // namespace epoch::wal
