#include "auth_failure_limiter.h"

#include <algorithm>
#include <iterator>

namespace epoch::server {

std::string PeerHost(std::string_view grpc_peer) {
  const std::size_t scheme = grpc_peer.find(':');
  if (scheme == std::string_view::npos) return std::string(grpc_peer);
  const std::size_t bracket = grpc_peer.find(']', scheme);
  const std::size_t port = grpc_peer.rfind(':');
  if (bracket != std::string_view::npos) return std::string(grpc_peer.substr(0, bracket + 1));
  if (port == scheme || grpc_peer.starts_with("unix:")) return std::string(grpc_peer);
  return std::string(grpc_peer.substr(0, port));
}

void AuthFailureLimiter::Refill(Bucket& b, Clock::time_point now) const {
  if (now <= b.refilled) return;
  const double earned = std::chrono::duration<double>(now - b.refilled) /
                        std::chrono::duration<double>(limits_.refill);
  b.tokens = std::min<double>(limits_.burst, b.tokens + earned);
  b.refilled = now;
  // Quiet for as long as the longest block since the last one ended: its blocks are forgotten.
  if (b.blocks > 0 && now - b.blocked_until >= limits_.backoff_max) b.blocks = 0;
}

AuthFailureLimiter::Bucket* AuthFailureLimiter::Find(Table& table, std::string_view key,
                                                     Clock::time_point now) {
  auto found = table.find(std::string(key));
  if (found == table.end()) {
    if (table.size() >= kMaxKeys) {
      for (auto it = table.begin(); it != table.end();) {
        Bucket& b = it->second;
        Refill(b, now);
        const bool idle = b.tokens >= limits_.burst && b.blocks == 0 && now >= b.blocked_until;
        it = idle ? table.erase(it) : std::next(it);
      }
      if (table.size() >= kMaxKeys) return nullptr;
    }
    Bucket fresh;
    fresh.tokens = limits_.burst;
    fresh.refilled = now;
    found = table.emplace(std::string(key), fresh).first;
  }
  Refill(found->second, now);
  return &found->second;
}

bool AuthFailureLimiter::Admit(std::string_view user, std::string_view host,
                               Clock::time_point now) {
  std::lock_guard lock(mu_);
  Bucket* u = Find(users_, user, now);
  Bucket* h = Find(hosts_, host, now);
  for (const Bucket* b : {u, h}) {
    if (b != nullptr && (now < b->blocked_until || b->tokens < 1)) return false;
  }
  for (Bucket* b : {u, h}) {
    if (b != nullptr) b->tokens -= 1;
  }
  return true;
}

void AuthFailureLimiter::AfterFailure(Bucket& b, Clock::time_point now) const {
  // Blocked again while earlier blocks are remembered, so the backoff keeps doubling even though
  // the bucket refilled during the last block.
  if (b.tokens >= 1 && b.blocks == 0) return;
  const int doublings = std::min(b.blocks, 30);
  const auto backoff =
      std::min<std::chrono::milliseconds>(limits_.refill * (1LL << doublings), limits_.backoff_max);
  b.blocked_until = now + backoff;
  ++b.blocks;
}

void AuthFailureLimiter::Finish(std::string_view user, std::string_view host, bool failed,
                                Clock::time_point now) {
  std::lock_guard lock(mu_);
  Bucket* u = Find(users_, user, now);
  Bucket* h = Find(hosts_, host, now);
  for (Bucket* b : {u, h}) {
    if (b == nullptr) continue;
    if (failed) {
      AfterFailure(*b, now);
    } else {
      b->tokens = std::min<double>(limits_.burst, b->tokens + 1);
    }
  }
  if (!failed && u != nullptr) {
    u->blocks = 0;
    u->blocked_until = Clock::time_point{};
  }
}

}  // namespace epoch::server
