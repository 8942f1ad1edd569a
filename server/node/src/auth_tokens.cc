#include "epoch/node/auth_tokens.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <algorithm>
#include <array>

namespace epoch::server {

std::string AuthTokens::NewToken() {
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) return {};
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

void AuthTokens::OnApplied(const ApplyResult& result) {
  if (!result.status.ok() || !result.response.has_auth()) return;
  const v1::AuthResult& auth = result.response.auth();
  std::lock_guard<std::mutex> lock(mu_);
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

std::size_t AuthTokens::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tokens_.size();
}

}  // namespace epoch::server
