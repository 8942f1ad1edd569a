#include "epoch/node/auth_tokens.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>
#include <charconv>

namespace epoch::server {

std::string AuthTokens::NewToken() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) return {};
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

std::optional<LogIndex> AuthTokens::IssuedIndex(std::string_view token) {
  const std::size_t dot = token.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view digits = token.substr(dot + 1);
  std::uint64_t index = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty()) {
    return std::nullopt;
  }
  return LogIndex(index);
}

void AuthTokens::OnAppliedUpTo(LogIndex index) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_applied_ = std::max(last_applied_, index);
  }
  applied_cv_.notify_all();
}

void AuthTokens::OnApplied(LogIndex index, const ApplyResult& result) {
  std::lock_guard<std::mutex> lock(mu_);
  last_applied_ = std::max(last_applied_, index);
  // Waiters re-check once the lock is released; with none, notify costs nothing.
  if (waiters_ > 0) applied_cv_.notify_all();
  if (!result.status.ok() || !result.response.has_auth()) return;
  const v1::AuthResult& auth = result.response.auth();
  if (auth.drop_all_tokens()) tokens_.clear();
  if (!auth.drop_tokens_of().empty()) {
    std::erase_if(tokens_, [&](const auto& t) { return t.second.user == auth.drop_tokens_of(); });
  }
  if (auth.token().empty()) return;
  if (tokens_.size() >= kMaxTokens) {
    auto oldest = tokens_.begin();
    for (auto it = tokens_.begin(); it != tokens_.end(); ++it) {
      if (it->second.expires_cluster_ms < oldest->second.expires_cluster_ms) oldest = it;
    }
    tokens_.erase(oldest);
  }
  tokens_[auth.token()] = Entry{auth.user(), auth.expires_cluster_ms()};
}

std::optional<std::string> AuthTokens::Lookup(std::string_view token, std::int64_t now_cluster_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  auto found = tokens_.find(std::string(token));
  if (found == tokens_.end() || found->second.expires_cluster_ms <= now_cluster_ms) {
    return std::nullopt;
  }
  Entry& entry = found->second;
  entry.expires_cluster_ms = std::max(entry.expires_cluster_ms, now_cluster_ms + renew_ttl_ms_);
  return entry.user;
}

bool AuthTokens::WaitIssued(std::string_view token,
                            std::chrono::steady_clock::time_point deadline) {
  const std::optional<LogIndex> index = IssuedIndex(token);
  if (!index) return false;
  std::unique_lock<std::mutex> lock(mu_);
  if (*index <= last_applied_) return true;  // perhaps applied since the caller's Lookup
  if (index->value() - last_applied_.value() > kMaxIndexAhead) return false;
  if (waiters_ >= kMaxWaiters) {
    ++waits_.busy;
    return false;
  }
  ++waiters_;
  const bool applied =
      applied_cv_.wait_until(lock, deadline, [&] { return *index <= last_applied_; });
  --waiters_;
  ++(applied ? waits_.applied : waits_.timed_out);
  return applied;
}

AuthTokens::WaitCounts AuthTokens::wait_counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  WaitCounts counts = waits_;
  counts.waiting = waiters_;
  return counts;
}

std::size_t AuthTokens::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.size();
}

}  // namespace epoch::server
