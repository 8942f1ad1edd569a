#include "epoch/failure_buckets.h"

#include <algorithm>
#include <iterator>

namespace epoch {

void FailureBuckets::Refill(Bucket& b, Clock::time_point now) const {
  if (now <= b.refilled) return;
  const double earned = std::chrono::duration<double>(now - b.refilled) /
                        std::chrono::duration<double>(limits_.refill);
  b.tokens = std::min<double>(limits_.burst, b.tokens + earned);
  b.refilled = now;
  // Quiet for as long as the longest block since the last one ended: its blocks are forgotten.
  if (b.blocks > 0 && now - b.blocked_until >= limits_.backoff_max) b.blocks = 0;
}

FailureBuckets::Bucket* FailureBuckets::Find(std::string_view key, Clock::time_point now) {
  auto found = table_.find(std::string(key));
  if (found == table_.end()) {
    if (table_.size() >= kMaxKeys) {
      for (auto it = table_.begin(); it != table_.end();) {
        Bucket& b = it->second;
        Refill(b, now);
        const bool idle = b.tokens >= limits_.burst && b.blocks == 0 && now >= b.blocked_until;
        it = idle ? table_.erase(it) : std::next(it);
      }
      if (table_.size() >= kMaxKeys) return nullptr;
    }
    Bucket fresh;
    fresh.tokens = limits_.burst;
    fresh.refilled = now;
    found = table_.emplace(std::string(key), fresh).first;
  }
  Refill(found->second, now);
  return &found->second;
}

bool FailureBuckets::Refuses(const Bucket* b, Clock::time_point now) {
  return b != nullptr && (now < b->blocked_until || b->tokens < 1);
}

void FailureBuckets::Take(Bucket* b) {
  if (b != nullptr) b->tokens -= 1;
}

void FailureBuckets::Finish(Bucket* b, bool failed, Clock::time_point now) const {
  if (b == nullptr) return;
  if (!failed) {
    b->tokens = std::min<double>(limits_.burst, b->tokens + 1);
    return;
  }
  // Blocked again while earlier blocks are remembered, so the backoff keeps doubling even though
  // the bucket refilled during the last block.
  if (b->tokens >= 1 && b->blocks == 0) return;
  const int doublings = std::min(b->blocks, 30);
  const auto backoff =
      std::min<std::chrono::milliseconds>(limits_.refill * (1LL << doublings), limits_.backoff_max);
  b->blocked_until = now + backoff;
  ++b->blocks;
}

void FailureBuckets::Forgive(Bucket* b) {
  if (b == nullptr) return;
  b->blocks = 0;
  b->blocked_until = Clock::time_point{};
}

bool FailureLimiter::Admit(std::string_view key, Clock::time_point now) {
  std::lock_guard lock(mu_);
  FailureBuckets::Bucket* b = buckets_.Find(key, now);
  if (FailureBuckets::Refuses(b, now)) return false;
  FailureBuckets::Take(b);
  return true;
}

void FailureLimiter::Finish(std::string_view key, bool failed, Clock::time_point now) {
  std::lock_guard lock(mu_);
  buckets_.Finish(buckets_.Find(key, now), failed, now);
}

}  // namespace epoch
