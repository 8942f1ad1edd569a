// FaultInjector: failure, stall and delay rules consulted before file-system operations.
#include "epoch/wal/fault_injector.h"

#include <algorithm>
#include <thread>

namespace epoch::wal {

PathMatch PathContains(std::string fragment) {
  return [fragment = std::move(fragment)](std::string_view path) {
    return path.find(fragment) != std::string_view::npos;
  };
}

PathMatch PathEndsWith(std::string suffix) {
  return [suffix = std::move(suffix)](std::string_view path) { return path.ends_with(suffix); };
}

FaultInjector::~FaultInjector() { Clear(); }

void FaultInjector::FailAlways(FsOp op, Status error, PathMatch match) {
  std::lock_guard lock(mu_);
  rules_.push_back(Rule{op, std::move(match), std::move(error), -1, false});
}

void FaultInjector::FailNext(FsOp op, Status error, int count, PathMatch match) {
  std::lock_guard lock(mu_);
  rules_.push_back(Rule{op, std::move(match), std::move(error), count, false});
}

void FaultInjector::Stall(FsOp op, PathMatch match) {
  std::lock_guard lock(mu_);
  rules_.push_back(Rule{op, std::move(match), Status::Ok(), -1, true});
}

void FaultInjector::Release(FsOp op) {
  std::lock_guard lock(mu_);
  std::erase_if(rules_, [op](const Rule& r) { return r.stall && r.op == op; });
  ++release_generation_;
  cv_.notify_all();
}

void FaultInjector::SetDelay(FsOp op, std::chrono::microseconds delay) {
  std::lock_guard lock(mu_);
  if (delay.count() <= 0) {
    delays_.erase(op);
  } else {
    delays_[op] = delay;
  }
}

void FaultInjector::Clear() {
  std::lock_guard lock(mu_);
  rules_.clear();
  delays_.clear();
  ++release_generation_;
  cv_.notify_all();
}

int FaultInjector::Blocked() const {
  std::lock_guard lock(mu_);
  return blocked_;
}

bool FaultInjector::AwaitBlocked(int n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return blocked_ >= n; });
}

std::uint64_t FaultInjector::Count(FsOp op) const {
  std::lock_guard lock(mu_);
  const auto it = counts_.find(op);
  return it == counts_.end() ? 0 : it->second;
}

Status FaultInjector::BeforeOp(FsOp op, std::string_view path) {
  std::chrono::microseconds delay{0};
  {
    std::unique_lock lock(mu_);
    counts_[op]++;
    // Stall first: a stalled fsync that is later failed is the usual chaos sequence.
    for (;;) {
      const bool stalled = std::any_of(rules_.begin(), rules_.end(), [&](const Rule& r) {
        return r.stall && Matches(r, op, path);
      });
      if (!stalled) break;
      ++blocked_;
      cv_.notify_all();
      const std::uint64_t generation = release_generation_;
      cv_.wait(lock, [&] { return release_generation_ != generation; });
      --blocked_;
    }
    for (auto it = rules_.begin(); it != rules_.end(); ++it) {
      if (it->stall || !Matches(*it, op, path)) continue;
      Status error = it->error;
      if (it->remaining > 0 && --it->remaining == 0) rules_.erase(it);
      return error;
    }
    if (const auto d = delays_.find(op); d != delays_.end()) delay = d->second;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);  // a slow disk, by design
  return Status::Ok();
}

}  // namespace epoch::wal
